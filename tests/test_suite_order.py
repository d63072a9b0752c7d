"""The suite's own scheduling (tests/conftest.py): the longest files go to xdist workers first."""

from __future__ import annotations

from pathlib import Path

from conftest import LONGEST_FIRST


def test_every_longest_first_file_exists_once():
    """A renamed or deleted file would silently lose its early place in the queue."""
    here = Path(__file__).parent
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [name for name in LONGEST_FIRST if not (here / name).is_file()] == []


def test_collection_puts_the_longest_files_first(request):
    """This run's items (collected by the same hook): files in LONGEST_FIRST order, then the rest."""
    files = list(dict.fromkeys(item.path.name for item in request.session.items))
    ranked = [name for name in files if name in LONGEST_FIRST]
    assert files[: len(ranked)] == ranked
    assert ranked == [name for name in LONGEST_FIRST if name in ranked]
