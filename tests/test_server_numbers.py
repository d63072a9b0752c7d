"""Issue 44, faults 4 and 6: what a server says is read, not trusted.

Measured before: negative usage counts gave a cost of -$1,000,000 and lifted the episode token cap
(6 requests where the honest run stops at 2); 1e18 tokens cost $2x10^12; NaN, Infinity or
fractional counts lost the row from samples.parquet, so every resume called the model again; a
`content` sent as a list of parts became an internal error; 100,000 tool calls in one reply all
entered the conversation and the journal. Each case is a real run against a server on 127.0.0.1.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from jail_episode import attack_task
from tsbench.core.config import build
from tsbench.harness import play
from tsbench.harness.rlm import RLMSettings
from tsbench.models.base import Message
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.server_numbers import content_text, token_count
from tsbench.testing.fake_openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(180)

ANSWER = 'The anomaly is at [120, 130]. {"answer": [120, 130]}'


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (0, 0),
        (17, 17),
        (17.0, 17),
        (-1, None),
        (-0.5, None),
        (2.5, None),
        (float("nan"), None),
        (float("inf"), None),
        (10**18, None),
        (1e18, None),
        ("12", None),
        (True, None),
        (None, None),
        ([3], None),
    ],
)
def test_a_token_count_is_a_finite_non_negative_plausible_integer(value, count):
    assert token_count(value) == count


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "b"}], "ab"),
        (["x", "y"], "xy"),
        ({"type": "text", "text": "z"}, "z"),
        ([{"type": "text", "text": {"value": "v"}}], "v"),
        (None, ""),
        (12, "12"),
    ],
)
def test_content_of_any_shape_is_read_as_text(content, text):
    assert content_text(content) == text


def test_a_reply_whose_content_is_a_list_of_parts_is_read():
    parts = json.dumps([{"type": "text", "text": "The anomaly "}, {"type": "text", "text": "is at [3, 4]."}])
    with FakeOpenAIServer([f"parts:{parts}"]) as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="k")
        completion = model.generate([Message("user", "where?")])
        model.close()
    assert completion.text == "The anomaly is at [3, 4]."


BAD_USAGE = [
    '{"prompt_tokens": NaN, "completion_tokens": 3}',
    '{"prompt_tokens": 5, "completion_tokens": Infinity}',
    '{"prompt_tokens": 2.5, "completion_tokens": 3}',
    '{"prompt_tokens": 1000000000000000000, "completion_tokens": 3}',
    '{"prompt_tokens": "12", "completion_tokens": -7}',
]


def test_rows_whose_server_sent_no_token_counts_are_kept_flagged_and_never_replayed(small_data, tmp_path, monkeypatch):
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    rows = [f"test-localize-1024-0000{i}" for i in range(4)] + ["test-localize-2048-00000"]
    with FakeOpenAIServer([f"usage:{usage}\n{ANSWER}" for usage in BAD_USAGE], default=f"ok:{ANSWER}") as server:
        cfg = {
            "model": "openai/fake-model",
            "base_url": server.base_url,
            "harness": "single-pass-text",
            "data": [str(small_data)],
            "sample_ids": rows,
            "concurrency": 1,
            "price": "2,2",
            "out": str(tmp_path / "run"),
        }
        run_eval(build(EvalConfig, cfg))
        assert server.request_count == 5
        run_eval(build(EvalConfig, cfg))  # a resume: every row is there, no model call again
        assert server.request_count == 5
    samples = pd.read_parquet(tmp_path / "run" / "samples.parquet")
    assert len(samples) == 5 and samples["error_type"].isna().all()
    assert samples["cost_usd"].isna().all()  # unknown, never $2e12 nor negative
    assert (samples["input_tokens"] > 0).all() and (samples["input_tokens"] < 100_000).all()  # our estimate
    assert (samples["output_tokens"] >= 0).all()
    assert all(dict(a).get("usage_invalid_calls") == "1" for a in samples["attributes"])
    calls = [json.loads(c)[0] for c in samples["calls"]]
    assert all(c["usage"] == "invalid" and c["usage_rejected"] for c in calls)
    from tsbench.leaderboard.load import load_results
    from tsbench.leaderboard.tables import cost_table

    costs = cost_table(load_results([tmp_path / "run"])[0]).iloc[0]  # the board says so: tokens estimated
    assert costs["tokens_estimated"] == 5 and costs["cost_known"] == 0


def test_negative_counts_cannot_lift_the_token_cap(monkeypatch):
    code = "```python\nprint(1)\n```"
    usage = '{"prompt_tokens": -1000000, "completion_tokens": -1000000}'
    with FakeOpenAIServer(default=f"usage:{usage}\n{code}") as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="k", price="1000,1000")
        outcome = play(model, "rlm", attack_task(), RLMSettings(max_turns=6, episode_token_cap=200))
        model.close()
    assert outcome.error_type == "token_cap", outcome.error
    assert server.request_count <= 2  # the honest run stops at 2; trusting -1e6 made 6
    assert outcome.result.input_tokens > 0 and outcome.result.cost_usd is None


def test_tool_calls_past_the_limit_never_enter_the_conversation(small_data, tmp_path, monkeypatch):
    """A reply of 5,000 calls with --max-tool-calls 2: two run, one note says how many did not, and the
    next request (and the journal) carry two, not 5,000."""
    pytest.importorskip("statsmodels")
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    flood = 'manytools:5000:channel_stats:{"channel": "ch_00"}'
    with FakeOpenAIServer([flood], default=f"ok:{ANSWER}") as server:
        cfg = {
            "model": "openai/fake-model",
            "base_url": server.base_url,
            "harness": "tools",
            "tool_protocol": "native",
            "max_tool_calls": 2,
            "data": [str(small_data)],
            "sample_ids": ["test-localize-1024-00000"],
            "concurrency": 1,
            "out": str(tmp_path / "run"),
        }
        run_eval(build(EvalConfig, cfg))
        second = server.bodies[1]["messages"]
    assert sum(1 for m in second if m["role"] == "tool") == 2
    assert len(json.dumps(second)) < 100_000
    assert any("more tool call(s) not run: at most 2 per reply" in str(m.get("content")) for m in second)
    row = pd.read_parquet(tmp_path / "run" / "samples.parquet").iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    assert dict(row["attributes"])["tool_calls_dropped"] == "4998"
    assert len(row["transcript"]) < 100_000
