"""TimeClaw on its own benchmarks: an evolved tool with required arguments is verified, admitted and
called in a later episode; a bank whose rationale a model wrote, shown the answer, changes a scripted
agent's CiK forecast where the retrieved precedent says so."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tsbench.core.answers import extract_choice
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import EpisodeTask, HarnessSettings, MemorySettings, get_harness
from tsbench.harness.tools import ToolsSettings
from tsbench.harness.toolset import Toolset, load_tools_dir
from tsbench.models.base import Completion
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.retry import RetryPolicy
from tsbench.tasks.base import Column, SampleRef, Scored, TaskFamily
from tsbench.tasks.cik.taskset import CiK
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.timeclaw import build_memory, load_bank
from tsbench.timeclaw.evolve import Candidate, EvolveReport, HeldOutTask, judge_candidate
from tsbench.timeclaw.memory_wrapper import Remembering

FAST_RETRY = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, rate_limit_base_delay_s=0.01, jitter=0.0)


@pytest.fixture(scope="module", autouse=True)
def _no_background_stumpy_compile():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSBENCH_STUMPY_WARMUP", "0")
        yield


def fake_model(server: FakeOpenAIServer) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", base_url=server.base_url, api_key="test", timeout_s=10, retry=FAST_RETRY)


# ------------------------------------------------------------ evolved tools with required arguments --

CAPM = '''def capm_regression(asset_channel: str, market_channel: str) -> dict:
    """OLS regression of the asset's log returns on the market's: alpha, beta and R^2.

    Args:
        asset_channel: channel of the asset's prices
        market_channel: channel of the market index
    """
    a = np.diff(np.log(series[asset_channel]))
    m = np.diff(np.log(series[market_channel]))
    beta, alpha = np.polyfit(m, a, 1)
    r2 = 1.0 - np.var(a - (alpha + beta * m)) / np.var(a)
    return {"alpha": float(alpha), "beta": float(beta), "r2": float(r2)}


def _verify_answer(result, task):
    return {"answer": "more volatile" if result["beta"] > 1 else "less volatile"}
'''
OPTIONS = ["more volatile", "less volatile"]


class MarketBeta(TaskFamily):
    """TSAIA's Market Beta item in miniature: is the asset more or less sensitive than the market?"""

    name = "market_beta"

    def score(self, category, gold, message):
        chosen = extract_choice(message)
        return Scored(float(chosen == gold["answer"]), chosen in OPTIONS, {"answer": chosen})

    def columns(self):
        return [Column("beta", "Beta", "acc", "TSAIA", tuple(OPTIONS))]


def beta_task(index: int, beta: float) -> tuple[HeldOutTask, np.ndarray]:
    rng = np.random.default_rng(index)
    market_returns = rng.normal(0, 0.01, 300)
    asset_returns = beta * market_returns + rng.normal(0, 0.002, 300)
    prices = np.exp(np.cumsum(np.vstack([asset_returns, market_returns]), axis=1)) * 100
    gold = {"answer": OPTIONS[0] if beta > 1 else OPTIONS[1]}
    question = f"Is the asset more or less volatile than the market? Options: {OPTIONS}"
    task = HeldOutTask(f"beta-{index}", "beta", "all", question, ["asset", "market"], prices, OPTIONS, gold)
    return task, prices


def test_a_tool_with_required_arguments_is_admitted_and_called_later(tmp_path):
    tasks = [beta_task(i, b)[0] for i, b in enumerate([1.6, 0.5, 1.3, 0.7])]
    report = EvolveReport(out=str(tmp_path), gamma=0.7, success_threshold=0.5, model="fake", runs=[])
    candidate = judge_candidate(Candidate("beta"), CAPM, tasks, MarketBeta(), tmp_path, report, set())
    assert candidate.admitted, candidate.reason
    assert candidate.success_rate == 1.0 and candidate.n_heldout == 4
    first = candidate.results[0]
    assert first["arguments"] == {"asset_channel": "asset", "market_channel": "market"}  # bound from the task
    assert json.loads(first["answer"]) == {"answer": "more volatile"}  # checked against the answer
    [spec] = load_tools_dir(tmp_path)
    assert spec.parameters["required"] == ["asset_channel", "market_channel"]

    # a later episode: a scripted model calls the admitted tool with its arguments
    held, prices = beta_task(9, 1.8)
    task = EpisodeTask(held.id, "beta", "all", held.question, ["asset", "market"], prices.astype(np.float32))
    script = [
        "tool:capm_regression:{}",  # refused before the kernel: required arguments missing
        'tool:capm_regression:{"asset_channel": "asset", "market_channel": "market"}',
        'ok:{"answer": "more volatile"}',
    ]
    with FakeOpenAIServer(script) as server:
        result = get_harness("tools").run(fake_model(server), task, ToolsSettings(tools_dir=str(tmp_path)))
        offered = {t["function"]["name"]: t["function"] for t in server.bodies[0]["tools"]}
    assert offered["capm_regression"]["parameters"]["required"] == ["asset_channel", "market_channel"]
    refused, called = [e for e in result.transcript if e["role"] == "tool"]
    assert refused["error"] and "needs argument(s) asset_channel, market_channel" in refused["observation"]
    assert not called["error"] and json.loads(called["observation"])["beta"] == pytest.approx(1.8, abs=0.05)
    assert MarketBeta().score("beta", {"answer": OPTIONS[0]}, result.final_message).score == 1.0


def test_arguments_from_the_helper_and_unbindable_parameters(tmp_path):
    tasks = [beta_task(i, b)[0] for i, b in enumerate([1.6, 0.5, 1.3])]
    report = EvolveReport(out=str(tmp_path), gamma=0.7, success_threshold=0.5, model="fake", runs=[])
    renamed = CAPM.replace("asset_channel", "y").replace("market_channel", "x")
    refused = judge_candidate(Candidate("beta"), renamed, tasks, MarketBeta(), tmp_path, report, set())
    assert not refused.admitted and "binds to nothing" in refused.reason and refused.results == []
    helped = renamed + '\n\ndef _verify_arguments(task):\n    return {"y": task["channels"][0], "x": "market"}\n'
    admitted = judge_candidate(Candidate("beta"), helped, tasks, MarketBeta(), tmp_path / "h", report, set())
    assert admitted.admitted and admitted.results[0]["arguments"] == {"y": "asset", "x": "market"}
    wrong = CAPM.replace('"more volatile" if', '"less volatile" if')  # an always-"less" rule: caught
    rejected = judge_candidate(Candidate("beta"), wrong, tasks, MarketBeta(), tmp_path / "w", report, set())
    assert not rejected.admitted and rejected.success_rate == pytest.approx(1 / 3)  # right only for beta 0.5


# --------------------------------------------------------------------- memory with a model rationale --

RULE = "When the scenario announces a heat wave, lift the forecast by 5 over the whole horizon."


def cik_record(seed: int) -> dict:
    index = pd.date_range("2024-01-01", periods=24, freq="h")
    future = pd.date_range("2024-01-02", periods=6, freq="h")
    history = 10.0 + np.random.default_rng(seed).normal(0, 0.1, 24).round(3)  # a series of its own
    return {
        "name": "ElectricityIncreaseInPredictionTask",
        "seed": seed,
        "weight": "1",
        "context_sources": ["c_f"],
        "background": "Hourly electricity load of one building.",
        "scenario": "A heat wave starts at the first forecast hour.",
        "constraints": "",
        "past_time": pd.DataFrame({"load": history}, index=index).to_json(),
        "future_time": pd.DataFrame({"load": [15.0] * 6}, index=future).to_json(),
        "metric_scaling": 0.2,
        "region_of_interest": [],
        "constraint_min": None,
        "constraint_max": None,
    }


class RuleFollower:
    """A scripted agent: forecasts the last history value, lifted by 5 when a precedent says to."""

    name = "scripted/rule-follower"

    def generate(self, messages, *, max_tokens=None, temperature=None, task=None):
        text = messages[-1].content
        lift = 5.0 if "lift the forecast by 5" in text else 0.0  # the rule, only where a precedent states it
        rows = [[10.0 + lift] * 3] * 6  # TimeClaw's quantile answer: one row per step, one value per level
        return Completion(json.dumps({"levels": [0.1, 0.5, 0.9], "samples": rows}), input_tokens=len(text) // 4)

    def close(self):
        pass


@pytest.fixture(scope="module")
def cik_data(tmp_path_factory):
    source = tmp_path_factory.mktemp("cik_published")
    (source / "all_tasks.json").write_text("\n".join(json.dumps(cik_record(s)) for s in range(4)) + "\n")
    out = tmp_path_factory.mktemp("cik")
    CiK().generate({"path": str(source), "seed": 3}, out)
    return out / "seed3"


def test_a_model_written_rationale_changes_the_answer(cik_data, tmp_path):
    with FakeOpenAIServer(default='ok:{"levels": [0.5], "samples": [[15], [15], [15], [15], [15], [15]]}') as server:
        cfg = build(
            EvalConfig,
            {
                "family": "cik",
                "model": "openai/fake-model",
                "base_url": server.base_url,
                "harness": "single-pass-text",
                "data": [str(cik_data)],
                "split": "train",
                "out": str(tmp_path / "runs" / "train"),
            },
        )
        run = run_eval(cfg)
    explanation = f"ok:Here it is. <context_to_action>{RULE}</context_to_action>"
    with FakeOpenAIServer(default=explanation) as server:
        bank_path = build_memory(
            run, out=tmp_path / "bank.parquet", embedder="none", rationale_model=fake_model(server)
        )
        shown = server.bodies[0]["messages"][0]["content"]
    assert "Correct answer:" in shown and '"forecast": [15.0' in shown  # the model saw the answer
    bank = load_bank(bank_path)
    assert (bank.records["rationale"] == RULE).all()
    assert bank.records["descriptor"].iloc[0].startswith("Hourly electricity load")  # Appendix C, CiK

    family = CiK()
    [test_file] = family.resolve([str(cik_data)], seed=3, split="test", root=None, filters={})
    row_id = str(family.index([test_file], {})["id"].iloc[0])
    sample = family.load(SampleRef("cik", str(test_file), row_id))
    harness = get_harness("single-pass-text")
    plain = harness.run(RuleFollower(), sample.task, HarnessSettings())
    memory = MemorySettings(memory_bank=str(bank_path), top_k=1)
    remembered = Remembering(harness, memory).run(RuleFollower(), sample.task, HarnessSettings())
    assert plain.final_message != remembered.final_message
    before = family.score(sample.task.category, sample.gold, plain.final_message)
    after = family.score(sample.task.category, sample.gold, remembered.final_message)
    assert before.metrics["rcrps"] == pytest.approx(0.2 * 5) and after.metrics["rcrps"] == 0.0
    assert remembered.transcript[0]["role"] == "memory" and len(remembered.transcript[0]["precedents"]) == 1


def test_tools_see_timestamps_all_peaks_and_the_whole_series(cik_data):
    from tsbench.harness.runtime.sandbox import Sandbox
    from tsbench.harness.tools import task_metadata
    from tsbench.harness.toolset import read_observation

    family = CiK()
    [train] = family.resolve([str(cik_data)], seed=3, split="train", root=None, filters={})
    sample = family.load(SampleRef("cik", str(train), str(family.index([train], {})["id"].iloc[0])))
    meta = task_metadata(sample.task)
    assert len(meta["timestamps"]) == 24 and meta["timestamps"][1] - meta["timestamps"][0] == 3600.0
    x = np.sin(np.arange(3000) * 2 * np.pi / 20)  # 150 peaks, more than a page of 100
    toolset = Toolset.build()
    with Sandbox({"x": x}, cell_timeout_s=120) as sandbox:
        assert not sandbox.run(toolset.install_code({**meta, "timestamps": list(np.arange(3000.0) * 60)})).error

        def call(name, **arguments):
            assert toolset.validate(name, arguments) is None
            return json.loads(read_observation(sandbox.run(toolset.call_code(name, arguments)), 100_000).text)

        overview = call("series_overview")
        assert overview["timestamps"] == 3000 and overview["time"]["median_step_s"] == 60.0
        first = call("find_peaks", limit=100)
        second = call("find_peaks", offset=first["next_offset"], limit=100)
        assert first["count"] == 150 and first["listed"] == 100 and second["listed"] == 50
        assert "next_offset" not in second and len(set(first["indices"]) | set(second["indices"])) == 150
        forecast = call("arima_forecast", p=1, periods=3)
        assert forecast["n_fit"] == 3000 and forecast["fit_start"] == 0 and len(forecast["upper_80"]) == 3
        assert call("arima_forecast", periods=3, fit_last=500)["n_fit"] == 500
