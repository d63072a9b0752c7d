"""The README's Quick tour run as a user types it (issue 50): every line of its first block, top to
bottom, exactly as written, in a fresh folder (so its relative data/ and results/ paths are the user's),
each bounded in time and checked for a result that means something; every line of its second block
(a key, a server, a GPU or a file the user supplies) checked for its one-line error; every line of the
paper-size block saying what it needs or costs.

The SmolLM2 line too runs as written: its caps (one reply of 16 tokens, the two Yes/No presence rows) are
what lets a 135M model on a CPU give valid, scored answers in minutes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tsbench.testing import readiness

pytestmark = pytest.mark.slow  # the tour is ~15 commands, SmolLM2 among them: minutes on 2 busy cores

ROOT = Path(__file__).resolve().parents[1]
TSBENCH = [sys.executable, "-m", "tsbench.cli"]
LINE_TIMEOUT_S = 900  # a bound per line, far above what any takes: a hang fails the test, not the suite


def readme_blocks() -> list[list[str]]:
    """The bash blocks of the README's Quick tour, each a list of its lines."""
    text = (ROOT / "README.md").read_text()
    tour = text[text.index("## Quick tour") :]
    tour = tour[: tour.index("\n## ", 1)]
    return [block.strip().splitlines() for block in re.findall(r"```bash\n(.*?)```", tour, re.S)]


def command(line: str) -> tuple[list[str], str]:
    """A README line as argv (after `tsbench`) and its comment."""
    code, _, comment = line.partition("  #")
    return shlex.split(code)[1:], comment.strip()


def code(line: str) -> str:
    """A README line without its comment: what the user types."""
    return line.partition("  #")[0].strip()


def tsbench(args: list[str], cwd: Path, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    import time

    started = time.monotonic()
    done = readiness.run([*TSBENCH, *args], capture_output=True, text=True, cwd=cwd, env=env)
    return done, time.monotonic() - started


def test_the_tour_has_its_blocks_and_every_line_says_what_it_costs_or_needs():
    run, needs, paper = readme_blocks()[:3]
    assert run[0] == "source .venv/bin/activate" and all(line.startswith("tsbench ") for line in run[1:])
    for line in [*run[1:], *needs, *paper]:
        if line.startswith("tsbench "):
            assert command(line)[1], f"no comment (cost or need) on: {line}"
    assert all(command(line)[1].startswith("needs ") for line in needs)
    [smollm2] = [line for line in run if "local/smollm2-135m" in line]
    assert "--max-turns 1" in smollm2 and "--max-tokens" in smollm2  # the caps a CPU needs, in the line itself


@pytest.fixture(scope="module")
def tour(tmp_path_factory) -> tuple[Path, dict[str, tuple[subprocess.CompletedProcess, float]]]:
    folder = tmp_path_factory.mktemp("tour")
    done = {}
    for line in readme_blocks()[0][1:]:
        args, _ = command(line)
        done[code(line)] = result = tsbench(args, folder)
        if result[0].returncode != 0:
            break
    return folder, done


def _samples(folder: Path, run: str) -> pd.DataFrame:
    return pd.read_parquet(folder / run / "samples.parquet")


def test_every_tour_line_runs_as_written_and_means_something(tour):
    folder, done = tour
    lines = [code(line) for line in readme_blocks()[0][1:]]
    for line in lines:
        assert line in done, f"not reached: {line}"
        result, seconds = done[line]
        said = [x.strip() for x in result.stdout.splitlines() if x.strip() and not set(x.strip()) <= set("─━│┃ ")]
        print(f"{seconds:6.1f} s  rc {result.returncode}  {line[:90]}  -> {(said or [''])[-1][:90]}")  # pytest -s
    for line in lines:
        result, _ = done[line]
        assert result.returncode == 0, f"{line}\n{result.stderr[-3000:]}"
        assert "Traceback" not in result.stderr, (line, result.stderr[-2000:])
        warnings = [w for w in result.stderr.splitlines() if w.startswith("warning:") and "are rough" not in w]
        assert not warnings, (line, warnings)  # rough intervals of 5-row runs are said; nothing else is
    by = {" ".join(command(line)[0][:4]): done[line][0] for line in lines}
    manifest = json.loads((folder / "data/small/seed42/manifest.json").read_text())
    assert {"test", "val", "train"} <= set(json.dumps(manifest).replace('"', " ").split())
    assert "localize" in by["describe data/small/seed42/test-precise.parquet"].stdout
    assert (folder / "row.png").stat().st_size > 1000
    zscore = _samples(folder, "results/scripted_zscore__rlm")
    assert len(zscore) == 5 and zscore["error_type"].isna().all() and zscore["score"].notna().all()
    assert zscore["id"].iloc[0] in by["show results/scripted_zscore__rlm"].stdout
    smollm2 = _samples(folder, "results/local_smollm2-135m__rlm")
    assert len(smollm2) == 2 and smollm2["error_type"].isna().all(), smollm2["error"].tolist()
    assert smollm2["valid"].all(), smollm2["final_message"].tolist()  # answers that mean something: not cut, parsed
    assert set(smollm2["parsed_answer"].map(json.loads)) <= {"Yes", "No"} and smollm2["score"].notna().all()
    assert (
        "2 valid, 0 invalid, 0 cut by the token cap, 0 errors" in by["eval --model local/smollm2-135m --harness"].stdout
    )
    localize = _samples(folder, "runs/scripted_zscore__rlm")
    assert len(localize) == 8 and set(localize["category"]) == {"localize"}
    said = [r for line, (r, _) in done.items() if "--limit 20" in line][0].stderr
    assert "--limit 20: the selection holds 8 rows; running those 8" in said
    detector = _samples(folder, "results/detector_default__direct")
    assert sorted(detector["id"]) == sorted(zscore["id"])  # the leaderboard compares the same rows
    assert (folder / "results/leaderboard/leaderboard.html").stat().st_size > 1000
    val = _samples(folder, "results/zscore-val")
    assert len(val) == 5 and val["id"].str.startswith("val-").all()
    assert len(pd.read_parquet(folder / "banks/zscore.parquet")) == 5
    assert list((folder / "results/scripted_zscore__rlm/export").rglob("*.eval")) or list(
        (folder / "results/scripted_zscore__rlm/export").rglob("*.json")
    )
    assert (folder / "data/small/seed42-hf/README.md").is_file()


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_lines_that_need_a_key_a_server_a_gpu_or_a_file_say_so_in_one_line(tour):
    folder, _ = tour
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VLLM_BASE_URL")}
    for line in readme_blocks()[1]:
        args, need = command(line)
        if "--base-url" in args and _port_taken(8000):
            continue  # something of this machine's listens there: the line would reach it
        result, seconds = tsbench(args, folder, env)
        lines = [x for x in result.stderr.splitlines() if x.strip()]
        assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (line, result.stderr)
        print(f"{seconds:6.1f} s  {line[:80]} -> {lines[0][:100]}")
        word = {"OPENAI_API_KEY": "OPENAI_API_KEY", "server": "http://127.0.0.1:8000/v1", "GPU": "vLLM"}
        expected = next((v for k, v in word.items() if k in need), "my_answers.jsonl")
        assert expected in lines[0], (line, lines[0])


def test_a_command_without_data_points_at_the_generated_set(tour):
    folder, _ = tour
    result, _ = tsbench(["eval", "--model", "scripted/zscore", "--harness", "rlm", "--limit", "1"], folder)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--data data/small/seed42" in result.stderr and "1 GB" not in result.stderr
