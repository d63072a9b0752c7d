"""The TimeClaw tools harness: typed tools in the sandbox kernel, both tool-call protocols, end to end."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.baselines import build_policy
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import EpisodeTask, get_harness
from tsbench.harness.runtime.observation import dropped_characters
from tsbench.harness.runtime.sandbox import Sandbox
from tsbench.harness.tool_constants import RESULT_TAG
from tsbench.harness.tool_protocol import JsonTextProtocol, NativeProtocol, choose_protocol, parse_json_calls
from tsbench.harness.tools import TOOLS_FINAL_NOTICE, ToolsSettings
from tsbench.harness.toolset import (
    SEED_TOOL_NAMES,
    Toolset,
    ToolSourceError,
    load_tools_dir,
    read_observation,
    seed_specs,
    spec_from_source,
    stumpy_cache_dir,
    stumpy_cache_ready,
    warm_stumpy_cache,
)
from tsbench.models.base import Message, ToolCall
from tsbench.models.openai_model import OpenAIChatModel, message_payload
from tsbench.models.retry import RetryPolicy
from tsbench.results.records import transcript_events
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.testing.fake_openai_server import FakeOpenAIServer

FAST_RETRY = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, rate_limit_base_delay_s=0.01, jitter=0.0)


@pytest.fixture(scope="module", autouse=True)
def _no_background_stumpy_compile():
    """Episodes here never call discords: keep the tools harness from compiling stumpy in the background."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TSBENCH_STUMPY_WARMUP", "0")
        yield


TABLE_10 = (
    "list_channels",
    "series_overview",
    "channel_stats",
    "channel_values",
    "compute_acf",
    "detect_periodicity",
    "find_peaks",
    "arima_forecast",
)
PRIMITIVES = ("robust_zscore_scan", "rolling_stats", "change_points", "discords", "plot_window")

BOOM = '''def boom(scale: float = 1.0) -> dict:
    """A tool that always raises.

    Args:
        scale: unused
    """
    return {"value": scale / 0}
'''


def fake_model(server: FakeOpenAIServer) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", base_url=server.base_url, api_key="test", timeout_s=10, retry=FAST_RETRY)


def synthetic_series(length: int = 3000) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    t = np.arange(length)
    a = np.sin(2 * np.pi * t / 50) + 0.2 * rng.standard_normal(length)
    a[1500:1560] += 10.0
    b = rng.standard_normal(length)
    b[2000:] += 3.0
    return {"a": a, "b": b}


def small_task(series: dict[str, np.ndarray], category: str = lb.LOCALIZE) -> EpisodeTask:
    names = list(series)
    return EpisodeTask(
        "t-1",
        category,
        "precise",
        "Where is the anomaly? Answer with JSON.",
        names,
        np.stack([series[n] for n in names]).astype(np.float32),
    )


def iou(a: tuple[int, int], b: tuple[int, int]) -> float:
    overlap = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    return overlap / (max(a[1], b[1]) - min(a[0], b[0]))


# -- typed specs and the two protocols (no kernel) --------------------------------------------------


def test_seed_tools_are_typed_with_json_schemas():
    specs = seed_specs()
    assert set(TABLE_10 + PRIMITIVES) == set(specs) == set(SEED_TOOL_NAMES)
    values = specs["channel_values"].parameters
    assert values["required"] == [] and values["additionalProperties"] is False
    assert values["properties"]["start"] == {"type": "integer", "description": "first index (inclusive)", "default": 0}
    assert values["properties"]["channel"]["type"] == "string"
    assert "500" in specs["channel_values"].description
    assert specs["plot_window"].image and specs["plot_window"].parameters["properties"]["channels"]["type"] == "array"
    assert all(spec.description and spec.family == "seed" for spec in specs.values())
    assert specs["arima_forecast"].openai_tool()["function"]["name"] == "arima_forecast"
    assert "plot_window" not in Toolset.build().names and "plot_window" in Toolset.build(image=True).names


def test_spec_from_source_parses_but_never_runs():
    spec = spec_from_source(BOOM + "\nraise SystemExit('never executed here')\n")
    assert spec.name == "boom" and spec.family == "evolved" and spec.description == "A tool that always raises."
    assert spec.parameters["properties"]["scale"] == {"type": "number", "description": "unused", "default": 1.0}
    typed = spec_from_source("def f(ch: str, k: int | None = None, xs: list[float] = [], on: bool = True):\n  pass\n")
    assert typed.parameters["required"] == ["ch"]
    assert typed.parameters["properties"]["xs"] == {"type": "array", "items": {"type": "number"}, "default": []}
    assert typed.signature() == "f(ch: string, k: integer = null, xs: array = [], on: boolean = true)"
    for bad, message in [
        ("def f(:\n", "syntax"),
        ("x = 1\n", "exactly one"),
        ("def f(*a):\n  pass\n", "plain"),
        ("def f(): pass\ndef g(): pass\n", "exactly one"),
        ("def f(x=len):\n  pass\n", "literal"),
    ]:
        with pytest.raises(ToolSourceError, match=message):
            spec_from_source(bad)


def test_host_side_validation():
    toolset = Toolset.build()
    assert toolset.validate("channel_values", {"channel": "a", "start": 3, "end": None}) is None
    assert "unknown tool" in toolset.validate("nope", {})
    assert "takes no argument" in toolset.validate("channel_stats", {"chanel": "a"})
    assert "must be of type integer" in toolset.validate("channel_values", {"start": "x"})
    assert "JSON object" in toolset.validate("channel_values", [1])


def test_json_text_protocol_parsing():
    names = Toolset.build().names
    text = (
        '<think>maybe <tool_call>{"name": "series_overview"}</tool_call></think>First:\n'
        '<tool_call>{"name": "channel_stats", "arguments": {"channel": "ch_00"}}</tool_call>\n'
        '<tool_call> {"name": "channel_values", "arguments": "{\\"stride\\": 4}"} </tool_call>\n'
        '<tool_call>{"name": broken}</tool_call>'
    )
    calls = parse_json_calls(text, names)
    assert calls[0] == ("channel_stats", {"channel": "ch_00"}, None)
    assert calls[1] == ("channel_values", {"stride": 4}, None)
    assert calls[2][0] == "" and "not valid JSON" in calls[2][2]
    assert parse_json_calls('Sure. {"name": "list_channels", "arguments": {}}', names) == [("list_channels", {}, None)]
    assert parse_json_calls('{"present": true, "start": 3, "end": 9}', names) == []  # a final answer
    assert parse_json_calls('{"name": "not_a_tool", "arguments": {}}', names) == []
    assert isinstance(choose_protocol(build_policy("scripted/tools")), NativeProtocol)
    assert isinstance(choose_protocol(build_policy("scripted/tools-json")), JsonTextProtocol)
    assert isinstance(choose_protocol(build_policy("scripted/tools"), "json"), JsonTextProtocol)
    with pytest.raises(ValueError, match="no native function calling"):
        choose_protocol(build_policy("scripted/tools-json"), "native")


def test_openai_wire_format_for_tool_messages():
    call = ToolCall("call_1", "channel_stats", '{"channel": "a"}')
    assert message_payload(Message("assistant", "", tool_calls=[call])) == {
        "role": "assistant",
        "content": "",  # not null: llama.cpp's server rejects it (tests/test_real_server.py)
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "channel_stats", "arguments": '{"channel": "a"}'}}
        ],
    }
    assert message_payload(Message("tool", '{"n": 3}', tool_call_id="call_1")) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"n": 3}',
    }
    with FakeOpenAIServer(['tool:channel_stats:{"channel": "a"}', "ok:done"]) as server:
        model = fake_model(server)
        tools = Toolset.build().openai_tools()
        first = model.generate([Message("user", "hi")], tools=tools, tool_choice="auto")
        second = model.generate([Message("user", "hi")])
        assert server.bodies[0]["tools"] == tools and server.bodies[0]["tool_choice"] == "auto"
        assert "tools" not in server.bodies[1]
    assert first.tool_calls == [ToolCall("call_1_0", "channel_stats", '{"channel": "a"}')] and first.text == ""
    assert first.extra["finish_reason"] == "tool_calls" and second.tool_calls == [] and second.text == "done"


# -- the tools inside a real kernel -----------------------------------------------------------------


def test_seed_tools_in_the_kernel_return_compact_exact_observations():
    series = synthetic_series()
    toolset = Toolset.build()

    with Sandbox(series, cell_timeout_s=120) as sandbox:
        assert not sandbox.run(toolset.install_code({"category": "localize", "regime": "precise"})).error

        def call(name, **arguments):
            assert toolset.validate(name, arguments) is None
            observation = read_observation(sandbox.run(toolset.call_code(name, arguments)), 8192)
            return observation, json.loads(observation.text)

        _, listed = call("list_channels")
        assert listed == {"channels": ["a", "b"], "n_channels": 2, "length": 3000}
        _, overview = call("series_overview")
        assert overview["task"] == {"category": "localize", "regime": "precise"} and overview["timestamps"] == 0
        _, stats = call("channel_stats", channel="b")
        assert stats["mean"] == pytest.approx(series["b"].mean(), rel=1e-5)
        assert stats["q75"] == pytest.approx(np.percentile(series["b"], 75), rel=1e-5)
        _, values = call("channel_values", channel="a", start=10, end=2000, stride=2)
        assert values["count"] == 500 and values["truncated"] and values["next_start"] == 1010
        np.testing.assert_allclose(values["values"], series["a"][10:1010:2], rtol=1e-5)  # full precision, 6 digits
        _, acf = call("compute_acf", channel="a", max_lag=100)
        c = series["a"] - series["a"].mean()
        assert len(acf["acf"]) == 101 and acf["acf"][0] == 1.0
        assert acf["acf"][50] == pytest.approx(np.dot(c[:-50], c[50:]) / np.dot(c, c), abs=1e-5)
        assert acf["acf"][50] > acf["acf"][25]  # the period is 50
        _, period = call("detect_periodicity", channel="a")
        assert period["dominant_period"] == pytest.approx(50, rel=0.02) and period["power_fraction"] > 0.2
        _, peaks = call("find_peaks", channel="a", prominence=5.0)
        assert 1500 <= peaks["indices"][0] < 1560 and peaks["count"] >= 1
        _, forecast = call("arima_forecast", channel="b", p=1, periods=5)
        assert len(forecast["forecast"]) == 5 and np.isfinite(forecast["aic"])
        _, scan = call("robust_zscore_scan")
        assert scan["flagged"][0] == "a" and scan["scan"][0]["channel"] == "a"
        assert iou((scan["scan"][0]["start"], scan["scan"][0]["end"]), (1500, 1560)) > 0.7
        _, rolling = call("rolling_stats", channel="b", window=100, points=50)
        assert len(rolling["mean"]) == 50 and abs(rolling["largest_mean_jump"]["to"] - 2000) < 100
        _, changes = call("change_points", channel="b")
        assert any(abs(p - 2000) <= 20 for p in changes["change_points"])
        failed, error = call("channel_stats", channel="zzz")
        assert failed.error and "unknown channel 'zzz'" in error["error"]
        failed, error = call("channel_values", channel="a", start=5, end=5)
        assert failed.error and "empty range" in error["error"]


@pytest.mark.slow
def test_a_tools_observation_counts_every_printed_character_it_hides():
    """Output printed beside a result is cut with a marker; cutting the JSON again keeps the real count."""
    with Sandbox({"x": np.zeros(4)}) as sandbox:
        for payload in ({"ok": {"n": 1}}, {"error": "boom"}):
            cell = sandbox.run(f"print('q' * 5000)\nprint({RESULT_TAG!r} + {json.dumps(payload)!r})")
            for max_chars in (8192, 600, 300):
                observation = read_observation(cell, max_chars)
                assert len(observation.text) <= max_chars and observation.error == ("error" in payload)
                assert observation.text.count("q") + dropped_characters(observation.text) == 5000


def test_discords_use_stumpy_with_a_warm_compile_cache():
    assert warm_stumpy_cache() and stumpy_cache_ready()  # about a minute, once per machine
    rng = np.random.default_rng(3)
    x = np.sin(np.arange(4000) / 10) + 0.05 * rng.standard_normal(4000)
    x[2500:2540] = 0.0  # a flat stretch where the sine should be
    toolset = Toolset.build(include=["discords"])
    with Sandbox({"x": x}, cell_timeout_s=300, readonly_paths=[stumpy_cache_dir()]) as sandbox:
        assert not sandbox.run(toolset.install_code({}, numba_cache=str(stumpy_cache_dir()))).error
        cell = sandbox.run(toolset.call_code("discords", {"m": 64, "k": 2}))
        stats = sandbox.run(
            "import importlib, stumpy.cache as _c\n"
            "_s = [getattr(importlib.import_module(f'stumpy.{m}'), f).stats for m, f in _c.get_njit_funcs()]\n"
            "print('HITS', sum(sum(s.cache_hits.values()) for s in _s), 'MISSES', sum(sum(s.cache_misses.values()) for s in _s))"
        ).stdout.split()
    found = json.loads(read_observation(cell, 8192).text)
    top = found["discords"][0]
    assert top["start"] < 2540 and top["end"] > 2500
    hits, misses = int(stats[1]), int(stats[3])
    assert hits > 0 and misses == 0, f"numba compiled in the kernel ({hits} cache hits, {misses} misses)"


# -- episodes ---------------------------------------------------------------------------------------


def test_tools_harnesses_resolve_by_name_and_differ_only_in_images():
    tools, with_images = get_harness("tools"), get_harness("tools-image")
    assert isinstance(with_images, type(tools)) and tools.settings_class is with_images.settings_class
    assert (tools.images, with_images.images) == (None, "observations")
    assert {k: v for k, v in tools.capabilities().items() if k != "images"} == {
        k: v for k, v in with_images.capabilities().items() if k != "images"
    }
    with pytest.raises(ValueError, match="tools-image"):  # an unknown name lists the choices
        get_harness("tool")


@pytest.mark.parametrize("model, regime", [("scripted/tools", "both"), ("scripted/tools-json", "coarse")])
def test_end_to_end_with_the_scripted_tool_policy(small_data, tmp_path, model, regime):
    cfg = build(
        EvalConfig,
        dict(
            model=model,
            harness="tools",
            data=[str(small_data)],
            regime=regime,
            limit_per_category=1,
            concurrency=2,
            out=str(tmp_path / "run"),
        ),
    )
    run_dir = run_eval(cfg)
    samples = pd.read_parquet(run_dir / schema.SAMPLES)
    expected = lb.ALL_CATEGORIES if regime == "both" else lb.MCQ_CATEGORIES
    assert set(samples["category"]) == set(expected)
    assert samples["error_type"].isna().all(), samples["error"].dropna().tolist()
    assert samples["valid"].all() and samples["score"].between(0, 1).all()
    assert (samples["turns"] == 2).all() and (samples["code_cells"] == 2).all() and not samples["forced_final"].any()
    for row in samples.itertuples():
        transcript = transcript_events(row._asdict())
        kinds = [e["role"] for e in transcript]
        assert kinds == ["system", "user", "tools", "assistant", "tool", "tool", "assistant"]
        assert transcript[2]["protocol"] == ("native" if model == "scripted/tools" else "json")
        calls = [e for e in transcript if e["role"] == "tool"]
        assert [c["name"] for c in calls] == ["list_channels", "robust_zscore_scan"]
        assert all(not c["error"] and c["seconds"] >= 0 for c in calls)
        assert json.loads(calls[1]["observation"])["scan"]
        assert transcript[-1]["content"] == row.final_message
    # The tool observations carry scripted/zscore's whole analysis: the same decisions, from the kernel.
    reference = build(
        EvalConfig,
        dict(
            model="scripted/zscore",
            harness="single-pass-text",
            data=[str(small_data)],
            regime=regime,
            limit_per_category=1,
            out=str(tmp_path / "reference"),
        ),
    )
    zscore = pd.read_parquet(run_eval(reference) / schema.SAMPLES)
    both = samples.set_index("id")["score"].to_frame("tools").join(zscore.set_index("id")["score"].rename("zscore"))
    assert len(both) == len(samples) and (both["tools"] - both["zscore"]).abs().max() < 1e-3


def test_tool_errors_become_observations_not_crashes(tmp_path):
    (tmp_path / "tools" / "boom").mkdir(parents=True)
    (tmp_path / "tools" / "boom" / "tool.py").write_text(BOOM)
    assert [s.name for s in load_tools_dir(tmp_path / "tools")] == ["boom"]
    calls = [
        {"name": "boom", "arguments": {}},
        {"name": "channel_stats", "arguments": {"channel": "nope"}},
        {"name": "no_such_tool", "arguments": {}},
        {"name": "channel_values", "arguments": "{not json"},
        {"name": "channel_values", "arguments": {"start": "x"}},
        {"name": "channel_values", "arguments": {"channel": "a", "end": 3}},
    ]
    script = ["tools:" + json.dumps(calls), 'ok:{"present": false}']
    task = small_task(synthetic_series(600))
    with FakeOpenAIServer(script) as server:
        result = get_harness("tools").run(fake_model(server), task, ToolsSettings(tools_dir=str(tmp_path / "tools")))
        bodies = server.bodies
    assert result.final_message == '{"present": false}' and result.turns == 2 and not result.forced_final
    tools = [e for e in result.transcript if e["role"] == "tool"]
    errors = [json.loads(e["observation"]).get("error", "") for e in tools]
    assert "ZeroDivisionError" in errors[0]
    assert "unknown channel 'nope'" in errors[1]
    assert "unknown tool 'no_such_tool'" in errors[2]
    assert "not valid JSON" in errors[3]
    assert "must be of type integer" in errors[4]
    assert errors[5] == "" and len(json.loads(tools[5]["observation"])["values"]) == 3
    assert [e["error"] for e in tools] == [True] * 5 + [False]
    assert result.code_cells == 3  # the three calls that reached the kernel
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == set(SEED_TOOL_NAMES) - {"plot_window"} | {"boom"}
    replies = [m for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in replies] == [f"call_1_{i}" for i in range(6)]
    assert bodies[1]["messages"][2]["tool_calls"][0]["function"]["name"] == "boom"


def test_last_turn_withdraws_tools_and_forces_the_answer():
    task = small_task(synthetic_series(600))
    with FakeOpenAIServer(default="tool:list_channels:{}") as server:
        result = get_harness("tools").run(fake_model(server), task, ToolsSettings(max_turns=2))
        last = server.bodies[-1]
    assert result.forced_final and result.turns == 2 and result.code_cells == 1 and result.final_message == ""
    assert last["tool_choice"] == "none" and last["messages"][-1] == {"role": "user", "content": TOOLS_FINAL_NOTICE}
    assert result.transcript[-2] == {"role": "notice", "content": TOOLS_FINAL_NOTICE}


def test_plot_window_returns_an_image_for_vision_models():
    task = small_task(synthetic_series(600))
    script = ['tool:plot_window:{"channels": ["a"], "start": 100, "end": 400}', 'ok:{"present": false}']
    with FakeOpenAIServer(script) as server:
        result = get_harness("tools-image").run(fake_model(server), task, ToolsSettings())
        second = server.bodies[1]["messages"]
    tool = next(e for e in result.transcript if e["role"] == "tool")
    assert json.loads(tool["observation"]) == {"channels": ["a"], "start": 100, "end": 400, "image": "attached"}
    assert len(tool["images"]) == 1
    picture = second[-1]
    assert picture["role"] == "user" and picture["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.slow
def test_local_smollm2_under_the_tools_harness(small_data, tmp_path):
    cfg = build(
        EvalConfig,
        dict(
            model="local/smollm2-135m",
            harness="tools",
            data=[str(small_data)],
            regime="precise",
            categories=[lb.LOCALIZE],
            limit_per_category=1,
            max_turns=2,
            max_tokens=48,
            concurrency=1,
            out=str(tmp_path / "run"),
        ),
    )
    run_dir = run_eval(cfg)
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    assert 1 <= row["turns"] <= 2 and row["output_tokens"] > 0 and 0.0 <= row["score"] <= 1.0
    transcript = json.loads(row["transcript"])
    assert transcript[2] == {**transcript[2], "role": "tools", "protocol": "json"}
    assert "<tool_call>" in transcript[0]["content"]  # the text protocol is explained to the model
