"""A folder is replaced only when it is provably a run (an export, a trained model) tsbench wrote: a
list of what it wrote, in the folder, and nothing else there (issue 44). Before: a shared TOML with
`out = "<folder>"` and `overwrite = true` deleted a user's folder that merely held a file named run.json."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.core.own_folder import OWNED_FILE, check_replaceable, config_overwrite_refusal
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.results import RUN_JSON
from tsbench.results.lock import LOCK_FILE
from tsbench.results.store import RUN_KIND, legacy_run_reason
from tsbench.tasks.anomalyxl import labels as lb


def one_line(code: int, err: str, *naming: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(text in lines[0] for text in naming), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(small_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("own") / "run"
    cfg = dict(model="scripted/zscore", harness="single-pass-text", data=[str(small_data)], regime="coarse")
    return run_eval(build(EvalConfig, cfg | dict(categories=[lb.PRESENCE], limit=2, out=str(out))))


def _copy(run_dir: Path, where: Path) -> Path:
    copy = Path(shutil.copytree(run_dir, where))
    (copy / ".tsbench.lock").unlink(missing_ok=True)
    return copy


def _check(folder: Path) -> None:
    check_replaceable(folder, RUN_KIND, "a run dir", marker=RUN_JSON, ignore=(LOCK_FILE,), legacy=legacy_run_reason)


def test_a_run_lists_what_it_wrote(run_dir):
    listed = json.loads((run_dir / OWNED_FILE).read_text())
    assert listed["kind"] == "run"
    assert {"run.json", "results.json", "samples.jsonl", "samples.parquet"} <= set(listed["entries"])
    _check(run_dir)  # its own run: replaceable


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    (folder / "src").mkdir(parents=True)
    (folder / "run.json").write_text('{"my": "notes"}')
    (folder / "src" / "code.py").write_text("keep me")
    return folder


def test_a_shared_config_cannot_delete_a_folder_holding_a_run_json(cli, small_data, tmp_path, monkeypatch):
    folder = _user_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "shared.toml"
    config.write_text(f'[eval]\nout = "{folder}"\noverwrite = true\n')
    args = ["eval", "--model", "scripted/zscore", "--data", small_data, "--regime", "coarse", "--limit", "1"]
    one_line(*cli(*args, "--config", config)[::2], "overwrite = true would replace", "outside this project's results/")
    # Named on the command line too: still not a run tsbench wrote.
    one_line(*cli(*args, "--config", config, "--overwrite")[::2], "cannot be proven a run dir", "refused to delete")
    assert (folder / "src" / "code.py").read_text() == "keep me" and (folder / "run.json").is_file()
    # Under the project's results/, a config's overwrite is the config's to give.
    assert config_overwrite_refusal(config, {"overwrite": True}, {}, tmp_path / "results" / "x") is None


def _variants(run_dir: Path, tmp_path: Path):
    """Folders that hold a run of ours and something else, each named by what the user did."""

    def added(folder):
        (folder / "notes.txt").write_text("mine")

    def replaced(folder):  # a file on the list, replaced by the user's (same name, other bytes)
        (folder / "results.json").write_text('{"mine": true}')

    def same_size_replaced(folder):
        data = (folder / "results.json").read_bytes()
        (folder / "results.json").write_bytes(data[:-2] + b"x}")

    def symlink(folder):
        os.symlink(tmp_path, folder / "link")

    def named_like_ours(folder):  # a subfolder named like one of our files
        (folder / "samples.jsonl.d").mkdir()
        (folder / "samples.jsonl.d" / "x").write_text("mine")

    def inside_subfolder(folder):
        (folder / "sub").mkdir()
        (folder / "sub" / "run.json").write_text("{}")

    def journal_rewritten(folder):  # a growing file that no longer begins with what we wrote
        (folder / "samples.jsonl").write_text('{"mine": 1}\n' * 50)

    def fifo(folder):
        os.mkfifo(folder / "pipe")

    for change in (added, replaced, same_size_replaced, symlink, named_like_ours, inside_subfolder, journal_rewritten):
        yield change.__name__, change
    if hasattr(os, "mkfifo"):
        yield "fifo", fifo


def test_a_run_with_anything_of_the_users_is_refused(run_dir, tmp_path):
    for name, change in _variants(run_dir, tmp_path):
        folder = _copy(run_dir, tmp_path / name)
        change(folder)
        with pytest.raises(UserError, match="refused to delete it"):
            _check(folder)


def test_a_crashed_run_stays_replaceable(run_dir, tmp_path):
    folder = _copy(run_dir, tmp_path / "crashed")
    with open(folder / "samples.jsonl", "a", encoding="utf-8") as fh:  # rows appended after the list
        fh.write('{"torn": ')
    (folder / "judge_cache.jsonl").write_text("{}\n")  # a growing file made after the list
    _check(folder)


def test_runs_of_the_previous_version_are_replaceable_only_when_provably_runs(run_dir, tmp_path):
    legacy = _copy(run_dir, tmp_path / "legacy")
    (legacy / OWNED_FILE).unlink()
    _check(legacy)  # a run's files only, a run's run.json, a journal of results rows
    for name, change in [
        ("extra", lambda f: (f / "notes.txt").write_text("mine")),
        ("not_our_run_json", lambda f: (f / "run.json").write_text('{"my": "notes"}')),
        ("journal_of_other_lines", lambda f: (f / "samples.jsonl").write_text('{"a": 1}\n{"b": 2}\n')),
        ("subfolder", lambda f: (f / "figures").mkdir()),
    ]:
        folder = _copy(legacy, tmp_path / f"legacy-{name}")
        change(folder)
        with pytest.raises(UserError, match="cannot be proven a run dir"):
            _check(folder)


def test_overwrite_replaces_our_run_and_refuses_one_changed(cli, run_dir, small_data, tmp_path):
    folder = _copy(run_dir, tmp_path / "again")
    args = ["eval", "--model", "scripted/zscore", "--harness", "single-pass-text", "--data", small_data]
    args += ["--regime", "coarse", "--categories", lb.PRESENCE, "--limit", "1", "--out", folder, "--overwrite"]
    code, _, err = cli(*args)
    assert code == 0, err
    assert (folder / OWNED_FILE).is_file()
    (folder / "results.json").write_text("{}")
    one_line(*cli(*args)[::2], "results.json, changed since tsbench wrote it")


def test_exports_replace_only_their_own(cli, run_dir, tmp_path):
    export = tmp_path / "export"
    assert cli("export", run_dir, "-f", "hf", "--out", export)[0] == 0
    assert (export / OWNED_FILE).is_file()
    assert cli("export", run_dir, "-f", "hf", "--out", export)[0] == 0  # its own export: replaced
    (export / "data" / "mine.csv").write_text("a,b\n")
    one_line(*cli("export", run_dir, "-f", "hf", "--out", export)[::2], "data/mine.csv", "refused to delete it")
    assert (export / "data" / "mine.csv").is_file()
    (export / "data" / "mine.csv").unlink()
    (export / OWNED_FILE).unlink()  # an export of the previous version: its layout alone
    assert cli("export", run_dir, "-f", "hf", "--out", export)[0] == 0
