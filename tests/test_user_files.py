"""The one reader of files under --path (core/user_files.py) and the input budgets it applies
(core/input_budget.py), on small files written here: what is refused, in one line naming the file,
what is followed, what the manifest gets, and what a parquet footer, its dictionaries and a JSON
line are judged by before a value is built. The families' own attacks are in
test_hostile_datasets.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tsbench.core.errors import UserError
from tsbench.core.input_budget import SCALE_ENV, Budget, check_parquet, declared_sizes, expanded_bytes
from tsbench.core.provenance import sha256_file
from tsbench.core.user_files import UserFolder

MiB = 2**20


@pytest.fixture
def root(tmp_path) -> Path:
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "a.txt").write_text("inside")
    (tmp_path / "host.txt").write_text("outside")
    return tmp_path / "data"


def test_names_from_files_must_be_plain_relative_paths(root):
    folder = UserFolder(root, "demo")
    assert folder.named(root, "sub/b.csv") == root / "sub" / "b.csv"
    assert folder.named(root, "2024-01-01T00:00.json") == root / "2024-01-01T00:00.json"
    for bad in ("../host.txt", "sub/../../host.txt", "/etc/passwd", "~root/x", "", "a\x00b", "c:/x"):
        with pytest.raises(UserError, match="not a plain relative path under --path") as refused:
            folder.named(root, bad, root / "REFERENCE.csv")
        assert str(refused.value).startswith("REFERENCE.csv: names") and "\n" not in str(refused.value)


def test_symlinks_inside_are_followed_and_recorded_by_their_name_those_leading_out_refused(root):
    (root / "sub" / "alias.txt").symlink_to("../a.txt")
    (root / "out.txt").symlink_to(root.parent / "host.txt")
    (root / "loop").symlink_to("loop")
    folder = UserFolder(root, "demo")
    assert folder.read_text(root / "sub" / "alias.txt") == "inside"
    assert folder.hashes() == {"sub/alias.txt": sha256_file(root / "a.txt")}
    with pytest.raises(UserError, match=r"^out.txt: leads to .*host.txt, outside --path .*; refused \(--family demo"):
        folder.read_text(root / "out.txt")
    with pytest.raises(UserError, match="out.txt: leads to"):
        folder.is_file(root / "out.txt")  # even a probe refuses: the family would read it next
    with pytest.raises(UserError, match="loop: cannot be resolved"):
        folder.is_file(root / "loop")
    assert not folder.is_file(root / "missing.txt") and not folder.is_file(root / "sub")
    assert folder.read() == ["sub/alias.txt"]  # refused files are never recorded as read
    (root.parent / "blobs").mkdir()
    (root.parent / "blobs" / "f00d").write_text("cached")
    (root / "snapshot.parquet").symlink_to(root.parent / "blobs" / "f00d")
    with pytest.raises(UserError, match="Hugging Face cache snapshot links into blobs/: download with `hf download"):
        folder.is_file(root / "snapshot.parquet")


def test_special_files_are_refused_and_folders_that_are_symlinks_not_entered(root, tmp_path):
    os.mkfifo(root / "pipe.jsonl")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.jsonl").write_text("{}\n")
    (root / "inner").mkdir()
    (root / "again").symlink_to(root / "inner")  # stays inside: walked where it lies, not twice
    folder = UserFolder(root, "demo")
    assert [p.name for p in folder.walk(lambda p: p.suffix == ".jsonl")] == ["pipe.jsonl"]
    with pytest.raises(UserError, match="^pipe.jsonl: is a FIFO, not a regular file; refused"):
        list(folder.json_lines(root / "pipe.jsonl"))
    (root / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserError, match="linked: leads to"):
        folder.listdir(root / "linked")
    with pytest.raises(UserError, match="linked: leads to"):  # named, not passed over in silence
        folder.walk()


def test_a_file_path_roots_the_folder_at_its_parent_and_a_missing_path_is_one_line(root):
    folder = UserFolder(root / "a.txt", "demo")
    assert folder.root == root.resolve() and folder.walk() == [root.resolve() / "a.txt"]
    with pytest.raises(UserError, match="does not exist"):
        UserFolder(root / "nope", "demo")


def test_reads_past_their_budget_are_refused_before_reading(root, monkeypatch):
    (root / "big.txt").write_bytes(b"x" * 2048)
    (root / "lines.jsonl").write_text('{"a": 1}\n' + json.dumps({"b": "y" * 3000}) + "\n")
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    folder = UserFolder(root, "demo", Budget(file_bytes=1024))
    with pytest.raises(UserError, match=r"^big.txt: the file is 2,048 bytes, over the input budget of 1,024 bytes"):
        folder.read_bytes(root / "big.txt")
    lines = UserFolder(root, "demo", Budget(line_bytes=1024)).json_lines(root / "lines.jsonl")
    assert next(lines) == {"a": 1}
    with pytest.raises(UserError, match="lines.jsonl:2: the line"):
        next(lines)
    with pytest.raises(UserError, match="deep.json is nested too deeply"):
        UserFolder(root, "demo").read_json(root / "deep.json")
    monkeypatch.setenv(SCALE_ENV, "4")
    assert len(UserFolder(root, "demo", Budget(file_bytes=1024)).read_bytes(root / "big.txt")) == 2048
    monkeypatch.setenv(SCALE_ENV, "zero")
    with pytest.raises(UserError, match="must be a positive number"):
        UserFolder(root, "demo")


def test_parquet_is_judged_by_its_footer_and_its_expanded_dictionaries(tmp_path):
    long = pa.table({"v": pa.array(np.ones(300_000))})  # run-length pages: a few KB on disk
    pq.write_table(long, tmp_path / "long.parquet")
    decompressed, fixed = declared_sizes(pq.ParquetFile(tmp_path / "long.parquet").metadata)
    assert fixed == 300_000 * 8 and decompressed < fixed
    with pytest.raises(UserError, match="long.parquet: the row count its footer declares is 300,000 rows"):
        check_parquet(tmp_path / "long.parquet", "long.parquet", Budget(rows=100_000))
    with pytest.raises(UserError, match="the decoded size of its values"):
        check_parquet(tmp_path / "long.parquet", "long.parquet", Budget(decoded_bytes=MiB))
    words = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1, None], pa.int32()), pa.array(["ab", "x" * 1000]))
    nested = pa.array([[1.0], [], [2.0, 3.0], None], pa.list_(pa.float64()))
    table = pa.table({"w": words, "n": nested})
    assert expanded_bytes(table) == (2 + 1000 + 1000) + 4 * 4 + nested.flatten().nbytes + 8 * 4
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(600, np.int32)), pa.array(["a" * 10_000]))
    pq.write_table(pa.table({"t": column}), tmp_path / "dict.parquet", compression="zstd")
    with pytest.raises(UserError, match=r"dict.parquet: its text once dictionaries are expanded is 5.7 MiB"):
        check_parquet(tmp_path / "dict.parquet", "dict.parquet", Budget(decoded_bytes=MiB))
    check_parquet(tmp_path / "dict.parquet", "dict.parquet", Budget(decoded_bytes=8 * MiB))
    # nested text over several row groups (TimeSage's periods.parquet at 12 scenarios): judged group by group
    lists = pa.table({"l": [["a" * 1000, "b"]] * 600})
    pq.write_table(lists, tmp_path / "lists.parquet", row_group_size=100)
    check_parquet(tmp_path / "lists.parquet", "lists.parquet", Budget(decoded_bytes=8 * MiB))
    with pytest.raises(UserError, match=r"lists.parquet: its text once dictionaries are expanded is 610,200 bytes"):
        check_parquet(tmp_path / "lists.parquet", "lists.parquet", Budget(decoded_bytes=MiB // 2))
    (tmp_path / "not.parquet").write_text("no")
    with pytest.raises(UserError, match="not.parquet is not a readable parquet file"):
        check_parquet(tmp_path / "not.parquet", "not.parquet", Budget())
