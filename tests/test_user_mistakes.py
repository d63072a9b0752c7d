"""Every user mistake about where output goes, which key was meant, or which server answers is one line
and exit 2, found before the first row (issue 50): a file where a folder is expected, a missing parent
that is a file, a read-only folder (a read-only bind mount made by bubblewrap, so root is refused too),
a misspelt TOML key, an unreachable --base-url, a classical model not trained yet, and a --limit larger
than the selection said aloud."""

from __future__ import annotations

import shutil
import socket
import sys

import pytest

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.core.nearest import edit_distance, nearest
from tsbench.eval.config import EvalConfig
from tsbench.harness.settings import build_run
from tsbench.testing import readiness

TSBENCH = [sys.executable, "-m", "tsbench.cli"]


def _one_line(code: int, err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_did_you_mean_picks_the_nearest_key():
    assert edit_distance("modle", "model") == 1 and edit_distance("modle", "mode") == 1
    assert nearest("modle", ["mode", "model"]) == "model"  # a swap keeps every letter: the nearer typo
    assert nearest("limt", ["limit", "seed", "split"]) == "limit"
    assert nearest("harnes", ["harness", "max_turns"]) == "harness"
    assert nearest("zzzz", ["limit", "model"]) is None
    assert nearest("rate", ["rate_x", "rate_y"], prefer=["rate_y"]) == "rate_y"  # the same section wins a tie
    with pytest.raises(UserError, match=r"did you mean model\?"):
        build(EvalConfig, {"modle": "scripted/zscore"})
    with pytest.raises(UserError, match=r"did you mean mode\?"):  # [eval.file-agent] holds mode
        build_run(EvalConfig, {"harness": "file-agent", "file_agent": {"mdoe": "sequential"}})


def test_output_folders_that_cannot_be_written_are_one_line(cli, small_data, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    common = ["eval", "--model", "scripted/zscore", "--data", small_data, "--limit", "1"]
    _one_line(*cli(*common, "--out", a_file)[::2], "--out", "is a file")
    _one_line(*cli(*common, "--log-dir", a_file)[::2], "--log-dir", "is a file")
    _one_line(*cli(*common, "--out", a_file / "run")[::2], "a_file is a file, not a folder")
    _one_line(*cli("generate", "--preset", "small", "--split", "test", "--out", a_file)[::2], "--out", "is a file")
    _one_line(*cli("export", small_data, "--format", "hf", "--out", a_file)[::2], "--out", "is a file")
    _one_line(*cli("leaderboard", small_data, "--out", a_file)[::2], "--out", "is a file")
    assert a_file.read_text() == "not a folder"


def test_every_command_that_writes_refuses_a_path_it_cannot_write(cli, small_data, tmp_path):
    """A file where a folder goes, a folder where a file goes, a parent that is a file: one line each, before
    any work (no model loads, no run starts), for every command with an output path."""
    a_file, a_folder = tmp_path / "a_file", tmp_path / "a_folder.png"
    a_file.write_text("not a folder")
    a_folder.mkdir()
    parquet = small_data / "test-precise.parquet"
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"id": "test-localize-1024-00000", "response": "{}"}\n')
    row = "test-localize-1024-00000"
    run = tmp_path / "run"  # what memory build and evolve look for before their --out: a run.json
    run.mkdir()
    (run / "run.json").write_text("{}")
    cases = [
        (["sft-baseline", "--model", "classical", "--data", small_data, "--out", a_file], "is a file"),
        (["train-grpo", "--config", "experiments/grpo/cpu_smoke.toml", "--out", a_file], "is a file"),
        (["memory", "build", run, "--out", a_folder], "is a folder"),
        (["evolve", run, "--model", "scripted/zscore", "--out", a_file], "is a file"),
        (["describe", parquet, "--plot", row, "--out", a_folder], "is a folder"),
        (["describe", parquet, "--plot", row, "--out", a_file / "row.png"], "a_file is a file, not a folder"),
        (["score", "--data", parquet, "--responses", answers, "--out", a_file / "s.parquet"], "is a file, not"),
        (["compare", small_data, small_data, "--out", a_file], "is a file"),
        (["contamination", "--model", "scripted/zscore", "--data", small_data, "--out", a_file], "is a file"),
        (["convert-tsaia", "--path", small_data, "--out", a_file], "is a file"),
    ]
    for args, needle in cases:
        code, _, err = cli(*args)
        _one_line(code, err, "--out", needle)
    assert a_file.read_text() == "not a folder" and list(a_folder.iterdir()) == []


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is installed by make setup")
def test_a_read_only_folder_is_one_line_before_anything_runs(small_data, tmp_path):
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    for args in (
        ["eval", "--model", "scripted/zscore", "--data", str(small_data), "--limit", "1", "--out", str(frozen / "run")],
        ["generate", "--preset", "small", "--split", "test", "--out", str(frozen / "data")],
    ):
        jailed = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(frozen), str(frozen), *TSBENCH, *args]
        result = readiness.run(jailed, capture_output=True, text=True)
        _one_line(result.returncode, result.stderr, "read-only", str(frozen))
    assert list(frozen.iterdir()) == []


def test_an_unreachable_server_is_found_by_one_probe_with_its_url(cli, small_data, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        code, _, err = cli(
            "eval", "--model", "my-model", "--base-url", url, "--data", small_data, "--limit", "2",
            "--out", tmp_path / "run",
        )  # fmt: skip
    _one_line(code, err, url, "--base-url")
    assert not (tmp_path / "run").exists()  # no run dir, no error rows


def test_classical_before_training_says_train_it_first(cli, small_data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("eval", "--model", "classical/models/classical", "--data", small_data, "--limit", "1")
    _one_line(code, err, "train it first", "tsbench sft-baseline --model classical")


def test_a_limit_beyond_the_selection_says_what_runs(cli, small_data, tmp_path):
    code, _, err = cli(
        "eval", "--model", "scripted/zscore", "--harness", "single-pass-text", "-T", "regime=precise",
        "-T", "categories=localize", "--limit", "20", "--data", small_data, "--log-dir", tmp_path,
    )  # fmt: skip
    assert code == 0, err
    assert "--limit 20: the selection holds 8 rows; running those 8" in err


def _tiny_disk() -> None:
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as ENOSPC on a full device (tests/test_disk_full.py)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8_000, 8_000))


@pytest.fixture(scope="module")
def two_row_run(run_tsbench, small_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "zscore"
    args = ["--harness", "single-pass-text", "--limit", "2", "--data", small_data, "--out", out]
    assert run_tsbench("eval", "--model", "scripted/zscore", *args) == 0
    return out


def test_no_space_left_while_writing_is_one_line(small_data, two_row_run, tmp_path):
    """Generate, export (a dataset, an inspect log), leaderboard (figures, HTML), describe --plot: one line,
    and nothing after it (inspect's half-written zip log, collected at exit, stays quiet)."""
    for args in (
        ["generate", "--preset", "small", "--split", "test", "--out", str(tmp_path / "gen")],
        ["export", str(small_data), "--format", "hf", "--out", str(tmp_path / "hf")],
        ["export", str(two_row_run), "--format", "inspect", "--out", str(tmp_path / "inspect")],
        ["leaderboard", str(two_row_run), "--out", str(tmp_path / "board"), "--n-boot", "20"],
        [
            "describe",
            str(small_data / "test-precise.parquet"),
            "--plot",
            "test-localize-1024-00000",
            "--out",
            str(tmp_path / "r.png"),
        ],
    ):
        result = readiness.run([*TSBENCH, *args], capture_output=True, text=True, preexec_fn=_tiny_disk)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert result.returncode == 2 and len(errors) == 1 and "no space left" in errors[0], result.stderr[-2000:]
        assert "Traceback" not in result.stderr and not result.stderr.split(errors[0])[1].strip(), result.stderr[-2000:]
