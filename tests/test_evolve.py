"""Capability evolution: a model (the loopback test double) writes tools from successful trajectories;
each is verified by real execution in the sandbox on held-out tasks and admitted only above gamma."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import EpisodeTask, get_harness
from tsbench.harness.tools import ToolsSettings
from tsbench.harness.toolset import Toolset, ToolSourceError, load_tools_dir
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.retry import RetryPolicy
from tsbench.tasks import get_taskset
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.rows import SCHEMA
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.timeclaw.evolve import REPORT, evolve_prompt, evolve_tools, verify_tool

FAST_RETRY = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, rate_limit_base_delay_s=0.01, jitter=0.0)
LENGTH = 512


@pytest.fixture(scope="module", autouse=True)
def _no_background_stumpy_compile():
    """Episodes here never call discords: keep the tools harness from compiling stumpy in the background."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSBENCH_STUMPY_WARMUP", "0")
        yield


GOOD_TOOL = '''def locate_zscore_window(threshold: float = 6.0) -> dict:
    """Localize the anomaly as the strongest robust z-score window of the series.

    Args:
        threshold: robust |z| above which the window counts as an anomaly
    """
    best = robust_zscore_scan(threshold=threshold)["scan"][0]
    if best["max_z"] <= threshold:
        return {"present": False}
    return {"present": True, "start": int(best["start"]), "end": int(best["end"])}
'''

BROKEN_TOOL = '''def opening_window(width: int = 10) -> dict:
    """Claims the anomaly opens the series, and fails whenever the first value is positive.

    Args:
        width: window width
    """
    if series[channels[0]][0] > 0:
        raise ValueError("unlucky first sample")
    return {"present": True, "start": 0, "end": width}
'''


def _question(length: int) -> str:
    return (
        f"You are given a time series with one channel ch_00, each L = {length} samples (indices 0 to "
        f"{length - 1}). It may contain one anomaly. Decide whether an anomaly is present and, if it is, give its "
        'window as half-open indices [start, end). Answer with one JSON object: {"present": true, "start": <int>, '
        '"end": <int>} or {"present": false}.'
    )


@pytest.fixture(scope="module")
def easy_data(tmp_path_factory):
    """A seed dir of twelve localize rows in the AnomalyXL row schema (white noise, ten with a +10 sigma
    level shift): rows 0-5 in train-precise.parquet, rows 6-11 in val-precise.parquet."""
    rng = np.random.default_rng(11)
    rows = []
    for index in range(12):
        values = rng.standard_normal(LENGTH)
        gold = {"_L": LENGTH, "present": False}
        if index < 10:
            start = int(rng.integers(40, LENGTH - 120))
            end = start + int(rng.integers(40, 80))
            values[start:end] += 10.0
            gold = {"_L": LENGTH, "present": True, "start": start, "end": end}
        rows.append(
            {
                "id": f"easy-localize-{index:03d}",
                "split": "train" if index < 6 else "val",
                "regime": "precise",
                "category": lb.LOCALIZE,
                "length": LENGTH,
                "n_channels": 1,
                "channel_names": ["ch_00"],
                "values": [values.astype(np.float32).tolist()],
                "question": _question(LENGTH),
                "options": [],
                "gold": json.dumps(gold),
                "plan": "{}",
                "seed": 11,
                "source_id": f"easy-localize-{index:03d}",
            }
        )
    folder = tmp_path_factory.mktemp("easy")
    pq.write_table(pa.Table.from_pylist(rows[:6], schema=SCHEMA), folder / "train-precise.parquet")
    pq.write_table(pa.Table.from_pylist(rows[6:], schema=SCHEMA), folder / "val-precise.parquet")
    return folder


@pytest.fixture(scope="module")
def easy_run(easy_data, tmp_path_factory):
    """scripted/tools under the tools harness on four of the train rows: the successful trajectories."""
    cfg = build(
        EvalConfig,
        dict(
            model="scripted/tools",
            harness="tools",
            data=[str(easy_data / "train-precise.parquet")],
            split="train",
            regime="precise",
            limit_per_category=4,
            concurrency=2,
            out=str(tmp_path_factory.mktemp("runs") / "easy"),
        ),
    )
    run_dir = run_eval(cfg)
    samples = pd.read_parquet(run_dir / schema.SAMPLES)
    assert (samples["score"] >= 0.5).sum() >= 3, samples[["id", "score", "final_message"]]
    return run_dir


def fake_model(server: FakeOpenAIServer) -> OpenAIChatModel:
    return OpenAIChatModel("fake-coder", base_url=server.base_url, api_key="test", timeout_s=10, retry=FAST_RETRY)


def reply(source: str) -> str:
    return f"ok:Here is the tool.\n```python\n{source}```"


def test_a_good_tool_is_verified_admitted_and_loads_into_the_tools_harness(easy_run, easy_data, tmp_path):
    out = tmp_path / "tools" / "easy"
    with FakeOpenAIServer([reply(GOOD_TOOL)]) as server:
        report = evolve_tools(easy_run, fake_model(server), out, gamma=0.7, examples_per_category=3, max_heldout=6)
        prompt = server.bodies[0]["messages"]
    [candidate] = report.candidates
    assert candidate.category == lb.LOCALIZE and candidate.name == "locate_zscore_window"
    assert candidate.admitted and candidate.success_rate >= 0.7 and candidate.n_heldout == 6
    assert not set(candidate.examples) & {r["id"] for r in candidate.results}  # held out: never shown
    assert any(int(r["id"][-3:]) >= 6 for r in candidate.results)  # val rows are among the held-out tasks
    assert "robust_zscore_scan" in prompt[0]["content"] and "Example 1 (" in prompt[1]["content"]
    assert "list_channels" in prompt[1]["content"]  # the trajectories' tool calls are shown
    saved = json.loads((out / "locate_zscore_window" / "tool.json").read_text())
    assert saved["success_rate"] == candidate.success_rate and saved["gamma"] == 0.7
    assert saved["heldout"] == [r["id"] for r in candidate.results]
    assert json.loads((out / REPORT).read_text())["candidates"][0]["admitted"]
    [spec] = load_tools_dir(out)
    assert spec.name == "locate_zscore_window" and spec.family == "evolved"

    # Admitted tools load into --harness tools --tools <out> and run in the kernel.
    row = next(
        r for r in pq.read_table(easy_data / "val-precise.parquet").to_pylist() if r["id"] == "easy-localize-009"
    )
    gold = json.loads(row["gold"])
    task = EpisodeTask(
        row["id"],
        row["category"],
        row["regime"],
        row["question"],
        row["channel_names"],
        np.asarray(row["values"], dtype=np.float32),
    )
    with FakeOpenAIServer(["tool:locate_zscore_window:{}", 'ok:{"present": false}']) as server:
        result = get_harness("tools").run(fake_model(server), task, ToolsSettings(tools_dir=str(out)))
        offered = {t["function"]["name"] for t in server.bodies[0]["tools"]}
    assert "locate_zscore_window" in offered and "robust_zscore_scan" in offered
    tools = [e for e in result.transcript if e["role"] == "tool"]
    found = json.loads(tools[0]["observation"])
    assert not tools[0]["error"] and found["present"] is True
    assert abs(found["start"] - gold["start"]) < 10 and abs(found["end"] - gold["end"]) < 10
    assert next(e for e in result.transcript if e["role"] == "tools")["evolved"] == ["locate_zscore_window"]


def test_a_tool_that_fails_verification_is_rejected(easy_run, tmp_path):
    out = tmp_path / "tools" / "broken"
    with FakeOpenAIServer([reply(BROKEN_TOOL)]) as server:
        report = evolve_tools(easy_run, fake_model(server), out, max_heldout=6)
    [candidate] = report.candidates
    assert candidate.name == "opening_window" and not candidate.admitted and candidate.success_rate < 0.7
    assert "rejected" in candidate.reason and len(candidate.results) == 6
    errors = [r for r in candidate.results if "error" in r]
    assert errors and all("unlucky first sample" in r["error"] for r in errors)  # raised in the kernel, recorded
    assert all(not r["success"] for r in candidate.results)
    assert not any(p.is_dir() for p in out.iterdir())  # nothing admitted
    assert json.loads((out / REPORT).read_text())["candidates"][0]["admitted"] is False


def test_unusable_replies_are_rejected_without_running(easy_run, tmp_path):
    clash = GOOD_TOOL.replace("locate_zscore_window", "channel_stats")
    for text, reason in [
        ("ok:I would rather not.", "no ```python block"),
        (reply("def f(:\n"), "syntax error"),
        (reply(clash), "already taken"),
        (reply(GOOD_TOOL.replace("threshold: float = 6.0", "threshold: float")), "binds to nothing"),
    ]:
        with FakeOpenAIServer([text]) as server:
            report = evolve_tools(easy_run, fake_model(server), tmp_path / "x", max_heldout=4)
        [candidate] = report.candidates
        assert not candidate.admitted and reason in candidate.reason, candidate.reason
        assert candidate.results == []
    with FakeOpenAIServer([reply(GOOD_TOOL)]) as server:
        report = evolve_tools(easy_run, fake_model(server), tmp_path / "y", min_heldout=50)
    assert "held-out" in report.candidates[0].reason and server.request_count == 0


def test_verification_is_real_execution_with_the_task_scorer(easy_data):
    rows = pq.read_table(easy_data / "val-precise.parquet").to_pylist()[2:6]  # two present, two absent
    from tsbench.timeclaw.evolve import HeldOutTask

    tasks = [
        HeldOutTask(
            r["id"],
            r["category"],
            r["regime"],
            r["question"],
            r["channel_names"],
            np.asarray(r["values"], dtype=np.float32),
            [],
            json.loads(r["gold"]),
        )
        for r in rows
    ]
    anomalyxl = get_taskset("anomalyxl")
    results = verify_tool(GOOD_TOOL, tasks, anomalyxl)
    assert [r["success"] for r in results] == [True] * 4
    assert [json.loads(r["answer"])["present"] for r in results] == [True, True, False, False]
    with pytest.raises(ToolSourceError, match="seed tool"):
        verify_tool(GOOD_TOOL.replace("locate_zscore_window", "find_peaks"), tasks, anomalyxl)
    assert "discords" in Toolset.build(extra=[]).names
    messages = evolve_prompt(lb.LOCALIZE, "Q?", [])
    assert "_verify_arguments" in messages[0].content and "_verify_answer" in messages[0].content


def test_verification_needs_the_seed_dirs_train_or_val_files(easy_run, easy_data, tmp_path):
    """Held-out rows come from the train/val files beside the run's data; none there is a clear error."""
    import shutil

    from tsbench.timeclaw.evolve import verification_files

    assert verification_files(get_taskset("anomalyxl"), [easy_data / "train-precise.parquet"]) == [
        easy_data / "train-precise.parquet",
        easy_data / "val-precise.parquet",
    ]
    lonely = tmp_path / "seed11"
    lonely.mkdir()
    shutil.copy(easy_data / "train-precise.parquet", lonely / "test-precise.parquet")
    with FakeOpenAIServer([reply(GOOD_TOOL)]) as server:
        with pytest.raises(ValueError, match="verifies tools on train/val rows.*no anomalyxl train or val split"):
            evolve_tools(easy_run, fake_model(server), tmp_path / "x", data=[str(lonely / "test-precise.parquet")])
        assert server.request_count == 0


def test_test_split_runs_are_refused_unless_asked(easy_run, tmp_path):
    import shutil

    run = tmp_path / "test-run"
    shutil.copytree(easy_run, run)
    journal = run / schema.JOURNAL  # the journal is what every reader reads first
    lines = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    journal.write_text("".join(json.dumps({**rec, "split": "test"}) + "\n" for rec in lines))
    with FakeOpenAIServer([reply(GOOD_TOOL)]) as server:
        with pytest.raises(ValueError, match="--include-test-split"):
            evolve_tools(run, fake_model(server), tmp_path / "x")
        assert server.request_count == 0


# -- a family other than AnomalyXL: TimerBed classification rows (aeon's shipped GunPoint) -----------

FIRST_OPTION_TOOL = '''def first_option(k: int = 0) -> dict:
    """Answer with the k-th of the task's class options.

    Args:
        k: which option
    """
    return {"answer": TASK["options"][k]}
'''


@pytest.fixture(scope="module")
def timerbed_run(tmp_path_factory):
    """GunPoint rows in TimerBed's published format (train and test splits), and a run on six train rows
    whose answers (always class "1") are right about half the time."""
    datasets = pytest.importorskip("aeon.datasets")
    import shutil
    from pathlib import Path

    release = tmp_path_factory.mktemp("timerbed-release")
    shipped = Path(datasets.__file__).parent / "data" / "GunPoint"
    (release / "GunPoint").mkdir()
    for split in ("TRAIN", "TEST"):
        shutil.copy(shipped / f"GunPoint_{split}.ts", release / "GunPoint" / f"GunPoint_{split}.ts")
    out = tmp_path_factory.mktemp("timerbed")
    get_taskset("timerbed").generate({"path": str(release), "seed": 1, "split": "all", "rows_per_cell": 12}, out)
    with FakeOpenAIServer(default='ok:{"answer": "1"}') as server:
        cfg = build(
            EvalConfig,
            {
                "family": "timerbed",
                "model": "openai/fake-model",
                "base_url": server.base_url,
                "harness": "single-pass-text",
                "data": [str(out / "seed1")],
                "split": "train",
                "limit_per_category": 6,
                "concurrency": 2,
                "out": str(tmp_path_factory.mktemp("runs") / "timerbed"),
            },
        )
        return run_eval(cfg)


def test_evolve_and_memory_build_on_a_timerbed_run(timerbed_run, tmp_path):
    from tsbench.tasks.base import SampleRef
    from tsbench.timeclaw import build_memory, load_bank

    samples = pd.read_parquet(timerbed_run / schema.SAMPLES)
    assert set(samples["category"]) == {"gunpoint"} and 0 < (samples["score"] >= 0.5).sum() < len(samples)
    bank = load_bank(build_memory(timerbed_run, out=tmp_path / "bank.parquet", embedder="none"))
    assert sorted(bank.records["id"]) == sorted(samples["id"])  # every finished episode, as TimeClaw's bank
    successful = build_memory(timerbed_run, admission="successful", out=tmp_path / "ok.parquet", embedder="none")
    assert sorted(load_bank(successful).records["id"]) == sorted(samples.loc[samples["score"] >= 0.5, "id"])
    assert (bank.records["family"] == "gunpoint").all() and (bank.records["length"] > 0).all()

    with FakeOpenAIServer([reply(FIRST_OPTION_TOOL)]) as server:
        report = evolve_tools(  # at least 0: whatever it scores (strictly above 0 would need one success)
            timerbed_run, fake_model(server), tmp_path / "tools", gamma=0.0, admission="at-least", max_heldout=6
        )
    [candidate] = report.candidates
    assert candidate.category == "gunpoint" and candidate.name == "first_option" and candidate.n_heldout == 6
    assert not set(candidate.examples) & {r["id"] for r in candidate.results}
    timerbed = get_taskset("timerbed")
    data = json.loads((timerbed_run / "run.json").read_text())["config"]["data"][0]
    for result in candidate.results:  # each held-out train row scored by TimerBed's own scorer
        sample = timerbed.load(SampleRef("timerbed", data, result["id"]))
        assert sample.columns["split"] == "train"
        assert result["success"] == (sample.gold["answer"] == sample.task.options[0]), result
    assert candidate.admitted and (tmp_path / "tools" / "first_option" / "tool.py").is_file()


def test_admission_is_strictly_above_gamma_as_the_paper_says():
    from tsbench.timeclaw.evolve import admits

    assert not admits(7 / 10, 0.7) and admits(8 / 10, 0.7)  # "exceeds a threshold gamma" (paper 3.3)
    assert admits(7 / 10, 0.7, "at-least") and not admits(6 / 10, 0.7, "at-least")
    with pytest.raises(ValueError, match="unknown admission rule"):
        admits(1.0, 0.7, ">=")
