"""The suite's own scheduling (tests/conftest.py): the longest files go to xdist workers first, and what
several files train is built once per test run."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from conftest import LONGEST_FIRST, build_once


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


def _build_slowly(folder: Path) -> dict:
    """A build that takes a moment and says who ran it (one line per build in builds.log beside it)."""
    with (folder.parent / "builds.log").open("a") as log:
        log.write(f"{os.getpid()}\n")
    time.sleep(0.5)
    (folder / "model.txt").write_text("weights")
    return {"built_by": os.getpid()}


def _ask(shared: Path, answers) -> None:
    folder, value = build_once(shared, "model", _build_slowly)
    answers.put((str(folder), (folder / "model.txt").read_text(), value["built_by"]))


def test_what_several_workers_ask_for_at_once_is_built_once(tmp_path):
    """Three processes (as xdist workers) ask together: one builds, all get its folder and result."""
    fork = multiprocessing.get_context("fork")
    answers = fork.Queue()
    askers = [fork.Process(target=_ask, args=(tmp_path, answers)) for _ in range(3)]
    for asker in askers:
        asker.start()
    got = [answers.get(timeout=600) for _ in askers]
    for asker in askers:
        asker.join()
    builders = (tmp_path / "builds.log").read_text().split()
    assert len(builders) == 1 and all(asker.exitcode == 0 for asker in askers)
    assert got == [(str(tmp_path / "model"), "weights", int(builders[0]))] * 3


def test_a_failed_build_is_built_again_by_the_next_to_ask(tmp_path):
    def broken(folder: Path) -> dict:
        (folder / "half.txt").write_text("half")
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        build_once(tmp_path, "model", broken)
    folder, value = build_once(tmp_path, "model", _build_slowly)
    assert value == {"built_by": os.getpid()} and sorted(p.name for p in folder.iterdir()) == ["model.txt"]
