"""`tsbench eval` end to end: real kernels, real parquet, a real loopback HTTP server (test double)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness.prompts import FINAL_TURN_NOTICE
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.testing import readiness
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.testing.readiness import wait_ready

ATTEMPTS = 3


def config(**settings) -> EvalConfig:
    """Flat settings, harness ones included, as a TOML [eval] table would give them."""
    return build(EvalConfig, settings)


def fake(server: FakeOpenAIServer, timeout_s: float = 10.0, **settings) -> EvalConfig:
    return config(
        model="openai/fake-model",
        base_url=server.base_url,
        client_timeout_s=timeout_s,
        max_attempts=ATTEMPTS,
        retry_delay_s=0.005,
        **settings,
    )


@pytest.mark.parametrize("harness", ["single-pass-text", "single-pass-image", "rlm", "rlm-image"])
def test_every_harness_and_regime_with_the_scripted_policy(small_data, tmp_path, harness):
    if harness == "single-pass-image":  # the scripted policy reads text; an image harness refuses it up front
        with pytest.raises(Exception, match="plays"):
            run_eval(config(model="scripted/zscore", harness=harness, data=[str(small_data)], out=str(tmp_path / "x")))
        return
    cfg = config(
        model="scripted/zscore",
        harness=harness,
        data=[str(small_data)],
        limit_per_category=1,
        concurrency=2,
        out=str(tmp_path / "run"),
    )
    run_dir = run_eval(cfg)
    samples = pd.read_parquet(run_dir / schema.SAMPLES)
    assert set(samples["category"]) == set(lb.ALL_CATEGORIES)
    assert samples["error_type"].isna().all(), samples["error"].dropna().tolist()
    assert samples["valid"].all() and samples["score"].between(0, 1).all()
    rlm = harness.startswith("rlm")
    assert (samples["turns"] == (2 if rlm else 1)).all()
    assert (samples["code_cells"] == (1 if rlm else 0)).all()
    transcript = json.loads(samples.iloc[0]["transcript"])
    if rlm:
        tool = [e for e in transcript if e["role"] == "tool"][0]
        assert "ZSCORE_SUMMARY" in tool["observation"]
    info = json.loads((run_dir / schema.RUN_JSON).read_text())
    assert (
        info["complete"]
        and info["expected_samples"] == 11
        and info["dataset"]["key"].startswith("anomalyxl/seed42/test/")
    )
    assert "git_commit" in info and info["versions"]["tsbench"]


def test_resume_after_kill_runs_every_id_exactly_once(small_data, tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "tsbench.cli",
        "eval",
        "--model",
        "scripted/zscore",
        "--harness",
        "rlm",
        "--data",
        str(small_data),
        "--regime",
        "precise",
        "--limit-per-category",
        "3",
        "--concurrency",
        "1",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    journal = out / schema.JOURNAL
    wait_ready(proc, lambda: journal.exists() and len(journal.read_text().splitlines()) >= 3, poll_s=0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(schema.read_journal(out))
    assert 3 <= partial < 15, "the run should have been killed mid-way"
    assert json.loads((out / schema.RUN_JSON).read_text())["expected_samples"] == 15  # written before any row
    from tsbench.leaderboard.load import load_results

    assert any("of 15 rows scored" in w for w in load_results([out])[2])  # a killed run's real total, not "?"
    res = readiness.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    samples = pd.read_parquet(out / schema.SAMPLES)
    assert len(samples) == 15 and samples["id"].is_unique
    assert samples["error_type"].isna().all()
    assert json.loads((out / schema.RUN_JSON).read_text())["complete"]
    again = readiness.run(cmd[:-2] + ["--max-turns", "2", "--out", str(out)], capture_output=True, text=True)
    assert again.returncode == 2 and "different settings" in again.stderr


def test_api_failures_become_error_rows_and_are_rerun_on_resume(small_data, tmp_path):
    with FakeOpenAIServer(default="500") as server:
        cfg = fake(
            server,
            harness="single-pass-text",
            data=[str(small_data)],
            regime="coarse",
            categories=[lb.PRESENCE],
            concurrency=1,
            out=str(tmp_path / "run"),
        )
        run_dir = run_eval(cfg)
        first = pd.read_parquet(run_dir / schema.SAMPLES)
        assert len(first) == 2 and (first["error_type"] == "server").all() and first["score"].isna().all()
        assert (first["attempts"] == ATTEMPTS).all()
        assert server.request_count == 2 * ATTEMPTS
        assert not json.loads((run_dir / schema.RUN_JSON).read_text())["complete"]
        server.default = 'ok:{"answer": "Yes"}'
        server.push("429")  # one rate limit, retried, then answered
        run_eval(cfg)
    second = pd.read_parquet(run_dir / schema.SAMPLES)
    assert len(second) == 2 and second["error_type"].isna().all()
    gold = second["gold"].map(lambda g: json.loads(g)["answer"])
    assert (second["score"] == (gold == "Yes").astype(float)).all()


def test_timeouts_are_retried_with_a_bound(small_data, tmp_path):
    with FakeOpenAIServer(["sleep:3"], default='ok:{"answer": "No"}') as server:
        cfg = fake(
            server,
            timeout_s=0.5,
            harness="single-pass-text",
            data=[str(small_data)],
            regime="coarse",
            categories=[lb.PRESENCE],
            limit_per_category=1,
            concurrency=1,
            out=str(tmp_path / "run"),
        )
        run_dir = run_eval(cfg)
        assert server.request_count == 2
    samples = pd.read_parquet(run_dir / schema.SAMPLES)
    assert samples["error_type"].isna().all()


def test_forced_final_and_observation_truncation(small_data, tmp_path):
    code = 'ok:Looking.\n```python\nprint("x" * 20000)\n```'
    with FakeOpenAIServer(default=code) as server:
        cfg = fake(
            server,
            harness="rlm",
            data=[str(small_data)],
            regime="precise",
            categories=[lb.LOCALIZE],
            limit_per_category=1,
            max_turns=3,
            concurrency=1,
            out=str(tmp_path / "run"),
        )
        run_dir = run_eval(cfg)
        last_request = server.bodies[-1]["messages"][-1]["content"]
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert row["forced_final"] and row["turns"] == 3 and row["code_cells"] == 2
    assert FINAL_TURN_NOTICE in json.dumps(last_request)
    assert row["score"] == 0.0 and not row["valid"]  # the reply holds no JSON: scored 0, recorded
    tool = [e for e in json.loads(row["transcript"]) if e["role"] == "tool"][0]
    assert len(tool["observation"]) <= 8192 and "truncated" in tool["observation"]


def test_sub_rlm_recursion_counts_sub_calls(small_data, tmp_path):
    script = [
        'ok:```python\nanswer = sub_rlm("Where is the anomaly?")\nprint("SUB:", answer)\n```',
        'ok:The nested agent says {"present": false}',
        'ok:{"present": false}',
    ]
    with FakeOpenAIServer(script) as server:
        cfg = fake(
            server,
            harness="rlm",
            data=[str(small_data)],
            regime="precise",
            categories=[lb.LOCALIZE],
            limit_per_category=1,
            depth=1,
            concurrency=1,
            out=str(tmp_path / "run"),
        )
        run_dir = run_eval(cfg)
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    assert row["sub_calls"] == 1 and row["sub_call_tokens"] > 0 and row["turns"] == 2
    tool = [e for e in json.loads(row["transcript"]) if e["role"] == "tool"][0]
    assert "SUB: The nested agent says" in tool["observation"]


@pytest.mark.slow
def test_local_smollm2_under_rlm(small_data, tmp_path):
    cfg = config(
        model="local/smollm2-135m",
        harness="rlm",
        data=[str(small_data)],
        regime="precise",
        categories=[lb.LOCALIZE],
        limit_per_category=1,
        max_turns=2,
        max_tokens=48,
        concurrency=1,
        out=str(tmp_path / "run"),
    )
    run_dir = run_eval(cfg)
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    assert row["output_tokens"] > 0 and row["input_tokens"] > 0 and 1 <= row["turns"] <= 2
    assert 0.0 <= row["score"] <= 1.0
    # 48 tokens rarely finish a reply: a cut-off reply is never the answer, and the row says so.
    assert row["final_message"] or row["truncated_replies"] >= 1
    assert [c["finish_reason"] for c in json.loads(row["calls"])] and row["truncated_replies"] <= row["turns"]


def _cli_with_default_sigint(*args: str) -> list[str]:
    """`python -m tsbench.cli ARGS` with SIGINT delivered and handled as a terminal gives it to a new
    process, whatever signal state this test worker passes on (a C library may leave SIGINT ignored,
    and a child inherits that)."""
    prelude = (
        "import runpy, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
        "signal.signal(signal.SIGINT, signal.default_int_handler); sys.argv = ['tsbench', *sys.argv[1:]]; "
        "runpy.run_module('tsbench.cli', run_name='__main__', alter_sys=True)"
    )
    return [sys.executable, "-c", prelude, *args]


def test_ctrl_c_keeps_finished_rows_and_exits_130(small_data, tmp_path):
    out = tmp_path / "run"
    cmd = _cli_with_default_sigint(
        "eval",
        "--model",
        "scripted/zscore",
        "--harness",
        "rlm",
        "--data",
        str(small_data),
        # 66 rows, one at a time: with warm jails a row takes a fraction of a second, and a busy box may
        # not run this test's loop for seconds; the run must still be going when Ctrl-C lands.
        "--limit-per-category",
        "6",
        "--concurrency",
        "1",
        "--out",
        str(out),
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal = out / schema.JOURNAL
    wait_ready(proc, lambda: journal.exists() and journal.read_text().count("\n") >= 2, poll_s=0.1)
    proc.send_signal(signal.SIGINT)
    _, err = readiness.communicate(proc)
    assert proc.returncode == 130 and "resume" in err
    rows = schema.read_journal(out)
    assert 2 <= len(rows) < 66 and all(r["error_type"] is None for r in rows)


def _cli(*args: str):
    """The real command in this process (a subprocess costs seconds of imports on a busy machine)."""
    from typer.testing import CliRunner

    from tsbench.cli import app

    return CliRunner().invoke(app, list(args))


def test_answerless_replies_are_server_errors_then_fail_on_error_and_show(small_data, tmp_path):
    """Fault injection end to end: a 200 with no choices, a body that is not JSON and a dropped
    connection are retried with the bound, then an error row (never a 0); `--fail-on-error`
    decides the exit code; `show` prints model text literally."""
    reply = 'ok:[/INST] [bold]kept literally[/bold] {"answer": "Yes"}'
    out = tmp_path / "run"
    with FakeOpenAIServer(["empty_choices"] * ATTEMPTS + ["bad_json", "drop", reply]) as server:
        cfg = fake(
            server,
            harness="single-pass-text",
            data=[str(small_data)],
            regime="coarse",
            categories=[lb.PRESENCE],
            concurrency=1,
            out=str(out),
        )
        run_eval(cfg)
        assert server.request_count == 2 * ATTEMPTS
        rows = pd.read_parquet(out / schema.SAMPLES).set_index("id")
        failed, scored = rows[rows["error_type"].notna()], rows[rows["error_type"].isna()]
        assert len(failed) == 1 and failed["error_type"].iloc[0] == "server" and failed["score"].isna().all()
        assert failed["attempts"].iloc[0] == ATTEMPTS and "no choices" in failed["error"].iloc[0]
        assert len(scored) == 1 and scored["valid"].all()
        assert scored["score"].iloc[0] == float(json.loads(scored["gold"].iloc[0])["answer"] == "Yes")

        shown = _cli("show", str(out), "--id", scored.index[0])
        assert shown.exit_code == 0, shown.output
        assert "[/INST] [bold]kept literally[/bold]" in shown.stdout

        server.default = "500"
        common = [
            "eval",
            "--model",
            "openai/fake-model",
            "--harness",
            "single-pass-text",
            "--data",
            str(small_data),
            "--regime",
            "coarse",
            "--categories",
            lb.PRESENCE,
            "--concurrency",
            "1",
            "--base-url",
            server.base_url,
            "--max-attempts",
            str(ATTEMPTS),
            "--retry-delay",
            "0.005",
            "--client-timeout",
            "10",  # as the run
            "--out",
            str(out),
        ]  # was made: retry settings change answers, so a resume must match them
        strict = _cli(*common)
        assert strict.exit_code == 1, strict.output
        lines = strict.stderr.splitlines()  # what runs, where, that it resumes, then progress as log lines
        assert lines[0] == "eval openai/fake-model / single-pass-text on anomalyxl", lines
        assert lines[1].startswith(f"run dir {out}") and "(resuming: 1 of 2 rows already done)" in lines[1]
        assert lines[2].startswith("1/2 rows"), lines  # progress from the start (the resumed row)
        assert "score 1.000 ± 0.000  errors 0" in strict.stderr  # overall mean ± stderr as it goes
        assert "1 of 2 rows are errors" in strict.stderr and "nan" not in strict.stdout
        tolerant = _cli(*common, "--fail-on-error", "1")
        assert tolerant.exit_code == 0, tolerant.output
        assert "1 of 2 rows are errors" in tolerant.stderr


def test_second_ctrl_c_abandons_hung_episodes(small_data, tmp_path):
    with FakeOpenAIServer(default="hang") as server:
        cmd = _cli_with_default_sigint(
            "eval",
            "--model",
            "openai/fake-model",
            "--harness",
            "single-pass-text",
            "--data",
            str(small_data),
            "--regime",
            "coarse",
            "--categories",
            lb.PRESENCE,
            "--concurrency",
            "2",
            "--base-url",
            server.base_url,
            "--client-timeout",
            "60",
            "--out",
            str(tmp_path / "run"),
        )
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        wait_ready(proc, lambda: server.request_count >= 2, poll_s=0.1)
        proc.send_signal(signal.SIGINT)
        # The second Ctrl-C only once the first is acknowledged: two signals the process has not yet
        # run Python for arrive as one (a busy box can hold it off the CPU for over a second).
        wait_ready(proc, lambda: any("interrupted: waiting" in line for line in lines), poll_s=0.1)
        proc.send_signal(signal.SIGINT)
        wait_ready(proc, lambda: proc.poll() is not None, poll_s=0.1)
        reader.join(timeout=10)
        err = "".join(lines)
    assert proc.returncode == 130
    assert "waiting for 2 episode(s) in flight (Ctrl-C again to abandon them)" in err
    assert "abandoned" in err and "Traceback" not in err


def _index(cells: dict[tuple[str, int], int]) -> pd.DataFrame:
    rows = [
        {"id": f"{c}-{n}-{i:03d}", "category": c, "length": n, "path": "p", "gold": "{}"}
        for (c, n), count in cells.items()
        for i in range(count)
    ]
    return pd.DataFrame(rows)


def test_limit_draws_every_length_cell_shuffled_by_seed_and_grows_as_a_superset():
    from tsbench.eval.selection import draw

    lengths = (16384, 32768, 65536, 131072)
    rows = _index({("localize", n): 50 for n in lengths} | {("lead_lag", n): 50 for n in (32768, 131072)})
    eight = draw(rows, ("length",), None, seed=42, per_category=8)
    assert eight.groupby("category").size().to_dict() == {"lead_lag": 8, "localize": 8}
    assert eight[eight["category"] == "localize"].groupby("length").size().to_dict() == dict.fromkeys(lengths, 2)
    assert not eight["id"].str.endswith(("-000", "-001")).all()  # not the first rows of each cell
    reached = set()
    previous: set[str] = set()
    for limit in range(1, 12):
        chosen = set(draw(rows, ("length",), None, seed=42, per_category=limit)["id"])
        assert previous <= chosen  # growing --limit extends a run
        previous = chosen
    for seed in range(8):
        two = draw(rows, ("length",), None, seed=seed, per_category=2)
        reached |= set(two.loc[two["category"] == "localize", "length"])
    assert reached == set(lengths)  # small limits still reach the longest series
    assert set(draw(rows, ("length",), 4, seed=1)["id"]) != set(draw(rows, ("length",), 4, seed=2)["id"])


def test_limit_counts_in_total_over_categories_and_grows_as_a_superset():
    """--limit N is N rows in all (inspect's and lm-eval's count), interleaving the categories."""
    from tsbench.eval.selection import draw

    lengths = (16384, 32768, 65536, 131072)
    rows = _index({("localize", n): 50 for n in lengths} | {("lead_lag", n): 50 for n in (32768, 131072)})
    previous: set[str] = set()
    for limit in range(1, 12):
        chosen = draw(rows, ("length",), limit, seed=42)
        assert len(chosen) == limit and previous <= set(chosen["id"])
        previous = set(chosen["id"])
    two = draw(rows, ("length",), 2, seed=42)
    assert set(two["category"]) == {"localize", "lead_lag"}  # spread over categories before repeating one
    both = draw(rows, ("length",), 3, seed=42, per_category=1)
    assert len(both) == 2 and both.groupby("category").size().eq(1).all()


def test_selection_refuses_a_limit_below_one_and_unknown_ids(small_data):
    from tsbench.core.errors import UserError
    from tsbench.eval.selection import select_rows
    from tsbench.tasks import get_taskset

    taskset = get_taskset("anomalyxl")
    files = taskset.resolve([str(small_data)], seed=42, split="test", root=None, filters={"regime": "precise"})
    for bad in (0, -1):
        with pytest.raises(UserError, match="--limit must be at least 1"):
            select_rows(taskset, files, limit=bad, filters={"regime": "precise"})
    with pytest.raises(UserError, match="no sample 'nope'"):
        select_rows(taskset, files, sample_ids=["nope"], filters={"regime": "precise"})
    one = select_rows(taskset, files, sample_ids=["test-localize-1024-00001"], filters={"regime": "precise"})
    assert one["id"].tolist() == ["test-localize-1024-00001"]


def test_a_dataset_is_its_manifest_not_the_files_a_run_selected(small_data):
    """A --regime precise run and a --regime both run on the same generated split compare as one dataset."""
    from tsbench.tasks import get_taskset

    taskset = get_taskset("anomalyxl")
    precise = taskset.dataset_identity([small_data / "test-precise.parquet"])
    both = taskset.dataset_identity([small_data / "test-precise.parquet", small_data / "test-coarse.parquet"])
    assert precise["key"] == both["key"] and (precise["family"], precise["seed"], precise["split"]) == (
        "anomalyxl",
        42,
        "test",
    )


def test_test_rows_shared_by_two_grids_are_one_dataset(tmp_path):
    """Two generations that differ only in grid sizes hold the same rows under shared ids: one dataset key.
    A setting that changes what a row holds gives another key."""
    from tsbench.tasks import get_taskset
    from tsbench.tasks.anomalyxl.rows import iter_rows

    taskset = get_taskset("anomalyxl")
    base = {"preset": "small", "split": "test", "categories": ["localize"], "lengths": [1024]}
    grids = {"a": base, "b": {**base, "rows_per_cell": 6, "train_rows": 64}, "c": {**base, "p_present": 0.5}}
    keys, rows = {}, {}
    for name, options in grids.items():
        manifest, _ = taskset.generate(options, tmp_path / name)
        path = manifest.parent / "test-precise.parquet"
        keys[name] = taskset.dataset_identity([path])["key"]
        rows[name] = {r.id: r.question for r in iter_rows(path)}
    assert keys["a"] == keys["b"] != keys["c"]
    shared = rows["a"].keys() & rows["b"].keys()
    assert len(shared) == len(rows["a"]) < len(rows["b"]) and all(rows["a"][i] == rows["b"][i] for i in shared)


def test_version_and_short_help():
    from typer.testing import CliRunner

    from tsbench import __version__
    from tsbench.cli import app

    runner = CliRunner()
    assert runner.invoke(app, ["--version"]).output.strip() == f"tsbench {__version__}"
    for args in (["-h"], ["eval", "-h"], ["memory", "build", "-h"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and "Usage" in res.output, args
