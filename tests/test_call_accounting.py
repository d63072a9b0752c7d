"""Every model call is accounted for (issue 28): keys scoped to their endpoint, error rows keep their
spend, each call's finish_reason / usage / attempts / latency, the token-cap rule, timeout vs retry
budget, server error bodies, endpoint-scoped prices, impossible combinations refused up front.

All traffic goes to a FakeOpenAIServer on 127.0.0.1 that the test starts itself.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness.accounting import CUT_OFF_NOTICE
from tsbench.leaderboard.load import load_results
from tsbench.leaderboard.tables import cost_table
from tsbench.models.base import Message, ModelError
from tsbench.models.endpoint import is_openai_endpoint
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.pricing import cost_usd, endpoint_cost_usd
from tsbench.models.registry import get_model
from tsbench.models.retry import DEFAULT_TIMEOUT_S, RetryPolicy, call_with_retries
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.testing import readiness
from tsbench.testing.fake_openai_server import FakeOpenAIServer

SECRET = "sk-the-users-real-openai-key"
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02, max_total_s=10.0, rate_limit_base_delay_s=0.01)
HELLO = [Message("user", "say hello")]
YES = '{"answer": "Yes"}'


@pytest.fixture
def user_env(monkeypatch):
    """A user who has exported their OpenAI key, and nothing else."""
    for var in ("OPENAI_BASE_URL", "VLLM_BASE_URL", "VLLM_API_KEY", "MY_SERVER_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return monkeypatch


def eval_config(server: FakeOpenAIServer, small_data, tmp_path, **settings) -> EvalConfig:
    values = dict(
        model="openai/gpt-4.1-mini",
        base_url=server.base_url,
        client_timeout_s=10.0,
        max_attempts=2,
        retry_delay_s=0.005,
        data=[str(small_data)],
        concurrency=1,
        out=str(tmp_path / "run"),
    )
    values.update(settings)
    return build(EvalConfig, values)


def rows_of(run_dir) -> pd.DataFrame:
    return pd.read_parquet(run_dir / schema.SAMPLES)


# -- 1. keys scoped to their endpoint ---------------------------------------------------------------


def test_the_openai_key_never_reaches_another_server(user_env):
    user_env.setenv("OPENAI_ORG_ID", "org-of-the-user")
    user_env.setenv("OPENAI_PROJECT_ID", "proj-of-the-user")
    with FakeOpenAIServer(default="ok:hi") as server:
        get_model("gpt-4.1-mini", base_url=server.base_url, retry=FAST).generate(HELLO)
        user_env.setenv("OPENAI_BASE_URL", server.base_url)  # the environment's base URL is no different
        get_model("gpt-4.1-mini", retry=FAST).generate(HELLO)
        user_env.setenv("MY_SERVER_KEY", "key-for-this-server")
        get_model("gpt-4.1-mini", base_url=server.base_url, api_key_env="MY_SERVER_KEY", retry=FAST).generate(HELLO)
        user_env.setenv("VLLM_BASE_URL", server.url)
        get_model("vllm/Qwen/Qwen2.5-0.5B-Instruct", retry=FAST).generate(HELLO)
    sent = [h["authorization"] for h in server.headers]
    assert sent == ["Bearer EMPTY", "Bearer EMPTY", "Bearer key-for-this-server", "Bearer EMPTY"]
    assert not any(SECRET in json.dumps(h) or "of-the-user" in json.dumps(h) for h in server.headers)


def test_a_named_key_variable_must_be_set_and_the_openai_host_is_recognised(user_env):
    with pytest.raises(ValueError, match="MY_SERVER_KEY") as caught:
        get_model("gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", api_key_env="MY_SERVER_KEY")
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="do not apply"):  # a local model has no endpoint to send a key to
        get_model("local/smollm2-135m", api_key_env="MY_SERVER_KEY")
    assert is_openai_endpoint("https://api.openai.com/v1") and is_openai_endpoint("https://API.openai.com/v1/")
    for other in (
        "http://127.0.0.1:8000/v1",
        "http://api.openai.com/v1",
        "https://api.openai.com.example.net/v1",
        "https://proxy.example.net/api.openai.com/v1",
    ):
        assert not is_openai_endpoint(other), other
    assert OpenAIChatModel("gpt-4.1-mini")._client.api_key == SECRET  # OpenAI's own API gets it


def test_eval_sends_the_key_named_by_api_key_env(user_env, small_data, tmp_path):
    user_env.setenv("MY_SERVER_KEY", "eval-key")
    with FakeOpenAIServer(default=f"ok:{YES}") as server:
        run_eval(
            eval_config(
                server,
                small_data,
                tmp_path,
                harness="single-pass-text",
                regime="coarse",
                categories=[lb.PRESENCE],
                limit_per_category=1,
                api_key_env="MY_SERVER_KEY",
            )
        )
    assert {h["authorization"] for h in server.headers} == {"Bearer eval-key"}


# -- 2. error rows keep what was spent; the cost table counts it --------------------------------------


def test_an_error_row_keeps_the_turns_tokens_cost_and_transcript_before_the_failure(user_env, small_data, tmp_path):
    code = "ok:Looking first.\n```python\nprint(len(series))\n```"
    with FakeOpenAIServer([code, "detail:400:no such model"], default="500") as server:
        cfg = eval_config(
            server,
            small_data,
            tmp_path,
            harness="rlm",
            regime="precise",
            categories=[lb.LOCALIZE],
            limit_per_category=1,
            price="1,2",
        )
        run_dir = run_eval(cfg)
    row = rows_of(run_dir).iloc[0]
    assert row["error_type"] == "bad_request" and pd.isna(row["score"]), row["error"]
    assert row["turns"] == 1 and row["code_cells"] == 1 and row["input_tokens"] > 0 and row["output_tokens"] > 0
    assert row["cost_usd"] == pytest.approx((row["input_tokens"] * 1 + row["output_tokens"] * 2) / 1e6)
    transcript = json.loads(row["transcript"])
    assert [e["role"] for e in transcript if e["role"] in ("assistant", "tool")] == ["assistant", "tool"]
    calls = json.loads(row["calls"])
    assert calls[0]["finish_reason"] == "stop" and calls[0]["usage"] == "reported"
    assert calls[-1]["error"] == "bad_request" and calls[-1]["status_code"] == 400 and calls[-1]["attempts"] == 1
    rows, _, _ = load_results([run_dir])
    costs = cost_table(rows).iloc[0]
    assert costs["cost_known"] == 1 and costs["cost_usd"] == pytest.approx(row["cost_usd"])
    assert costs["input_tokens"] == row["input_tokens"] and costs["error_rate"] == 1.0


def test_a_sub_rlm_episodes_cost_and_calls_are_the_rows_too(user_env, small_data, tmp_path):
    script = [
        'ok:```python\nprint("SUB:", sub_rlm("Where is the anomaly?"))\n```',
        'ok:The nested agent says {"present": false}',
        'ok:{"present": false}',
    ]
    with FakeOpenAIServer(script) as server:
        run_dir = run_eval(
            eval_config(
                server,
                small_data,
                tmp_path,
                harness="rlm",
                regime="precise",
                categories=[lb.LOCALIZE],
                limit_per_category=1,
                depth=1,
                price="1,1",
            )
        )
    row = rows_of(run_dir).iloc[0]
    assert pd.isna(row["error_type"]), row["error"]
    calls = json.loads(row["calls"])
    assert len(calls) == 3 and [c.get("sub", False) for c in calls] == [False, True, False]
    # Every call's dollars are in the row: the parent's two replies and the nested one.
    assert row["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls))
    assert row["cost_usd"] == pytest.approx((row["input_tokens"] + row["output_tokens"] + row["sub_call_tokens"]) / 1e6)


def test_a_jail_failure_after_some_calls_still_keeps_their_spend(user_env):
    """Where the harness kept nothing (here the jail fails after two replies), `play` reports what the
    agent's calls spent and the conversation as it stood."""
    from tsbench.harness import EpisodeTask, HarnessSettings, play
    from tsbench.harness.runtime.sandbox import SandboxError

    def dies_in_the_jail(model, task, cfg):
        messages = [Message("user", task.question)]
        for _ in range(2):
            messages.append(Message("assistant", model.generate(messages).text))
        raise SandboxError("the kernel died")

    task = EpisodeTask(row_id="r", category="presence", regime="coarse", question="is there an anomaly?")
    with FakeOpenAIServer(default="ok:one two") as server:
        model = OpenAIChatModel("m", base_url=server.base_url, retry=FAST, price="1,1")
        outcome = play(model, dies_in_the_jail, task, HarnessSettings())
    assert outcome.error_type == "sandbox" and outcome.result is not None
    result = outcome.result
    assert (
        result.turns == 2
        and result.output_tokens == 4
        and result.cost_usd == pytest.approx((result.input_tokens + result.output_tokens) / 1e6)
    )
    assert [e["role"] for e in result.transcript] == ["user", "assistant", "assistant"]
    assert [c["attempts"] for c in result.calls] == [1, 1]


# -- 3. every call's finish_reason, usage, attempts, latency; the token-cap rule --------------------


def test_each_call_is_recorded_and_a_cut_off_reply_is_never_the_answer(user_env, small_data, tmp_path):
    with FakeOpenAIServer(["500", f"nousage:{YES}", f"length:{YES}"]) as server:
        run_dir = run_eval(
            eval_config(
                server,
                small_data,
                tmp_path,
                harness="single-pass-text",
                regime="coarse",
                categories=[lb.PRESENCE],
                price="1,1",
            )
        )
    rows = rows_of(run_dir).sort_values("id").reset_index(drop=True)
    assert rows["error_type"].isna().all()
    calls = {r.id: json.loads(r.calls) for r in rows.itertuples()}
    by_reason = {c[0]["finish_reason"]: (rid, c[0]) for rid, c in calls.items()}
    missing_id, missing = by_reason["stop"]
    assert missing["usage"] == "missing" and missing["cost_usd"] is None and missing["attempts"] == 2
    assert pd.isna(rows.set_index("id").loc[missing_id, "cost_usd"])  # unknown tokens: unknown cost, not 0
    assert missing["failed_attempts"] == ["server"] and missing["latency_s"] >= 0 and missing["wall_s"] >= 0
    cut_id, cut = by_reason["length"]
    cut_row = rows.set_index("id").loc[cut_id]
    assert cut["usage"] == "reported" and cut["attempts"] == 1 and cut_row["cost_usd"] > 0
    assert cut_row["truncated_replies"] == 1 and cut_row["final_message"] == "" and not cut_row["valid"]
    assert rows.set_index("id").drop(cut_id)["truncated_replies"].eq(0).all()


def test_answer_cut_replies_takes_a_capped_reply_as_the_answer(user_env, small_data, tmp_path):
    """The opt-in for rewards that read short capped replies: the reply is the answer, still counted as cut."""
    with FakeOpenAIServer([f"length:{YES}"], default=f"length:{YES}") as server:
        run_dir = run_eval(
            eval_config(
                server,
                small_data,
                tmp_path,
                harness="single-pass-text",
                regime="coarse",
                categories=[lb.PRESENCE],
                limit_per_category=1,
                answer_cut_replies=True,
            )
        )
    row = rows_of(run_dir).iloc[0]
    assert row["truncated_replies"] == 1 and row["final_message"] == YES and row["valid"]


def test_rlm_goes_on_after_a_reply_cut_inside_a_code_block(user_env, small_data, tmp_path):
    cut = "length:Let me look.\n```python\nprint(series"  # no closing fence: no code, and no answer either
    with FakeOpenAIServer([cut], default='ok:{"start": 10, "end": 20}') as server:
        run_dir = run_eval(
            eval_config(
                server,
                small_data,
                tmp_path,
                harness="rlm",
                regime="precise",
                categories=[lb.LOCALIZE],
                limit_per_category=1,
            )
        )
        second_request = server.bodies[1]["messages"]
    row = rows_of(run_dir).iloc[0]
    assert pd.isna(row["error_type"]) and row["turns"] == 2 and row["truncated_replies"] == 1
    assert row["final_message"] == '{"start": 10, "end": 20}'
    assert second_request[-1] == {"role": "user", "content": CUT_OFF_NOTICE}
    assert [c["finish_reason"] for c in json.loads(row["calls"])] == ["length", "stop"]


# -- 4. per-call timeout and retry budget ------------------------------------------------------------


def test_a_timed_out_call_is_retried_even_when_the_timeout_fills_the_budget(user_env):
    tight = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.01, max_total_s=0.3)
    with FakeOpenAIServer(["sleep:3", "ok:second try"]) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, timeout_s=0.4, retry=tight)
        completion = model.generate(HELLO)
    assert completion.text == "second try" and completion.extra["attempts"] == 2
    assert completion.extra["failed_attempts"] == ["timeout"]


def test_the_default_budget_retries_a_timeout_and_a_longer_timeout_never_shrinks_it():
    policy = RetryPolicy()
    assert policy.budget_s(DEFAULT_TIMEOUT_S) >= 2 * DEFAULT_TIMEOUT_S
    assert policy.budget_s(900.0) >= policy.budget_s(DEFAULT_TIMEOUT_S) + 2 * 600.0
    now = [0.0]

    def timing_out():
        now[0] += DEFAULT_TIMEOUT_S  # every attempt runs the full default timeout
        raise ModelError("timeout", "Request timed out.")

    with pytest.raises(ModelError) as caught:
        call_with_retries(
            timing_out,
            policy,
            sleep=lambda s: now.__setitem__(0, now[0] + s),
            clock=lambda: now[0],
            call_timeout_s=DEFAULT_TIMEOUT_S,
        )
    assert caught.value.attempts >= 2 and caught.value.elapsed_s >= 2 * DEFAULT_TIMEOUT_S


# -- 5. server error bodies are kept ------------------------------------------------------------------


def test_the_servers_own_words_are_kept_in_the_error(user_env):
    long_body = "upstream said: " + "x" * 2000
    cases = [
        ("detail:400:model 'qwen-typo' not found; try Qwen/Qwen3-0.6B", "model 'qwen-typo' not found"),
        ("400", "scripted 400"),  # the OpenAI shape: error.message
        (f"raw:502:{long_body}", long_body[:500]),
    ]
    for behaviour, needle in cases:
        with FakeOpenAIServer([behaviour]) as server:
            model = OpenAIChatModel("m", base_url=server.base_url, retry=RetryPolicy(max_attempts=1))
            with pytest.raises(ModelError) as caught:
                model.generate(HELLO)
        assert needle in str(caught.value), str(caught.value)
    assert long_body[:501] not in str(caught.value)
    with FakeOpenAIServer(["detail:401:missing bearer token"]) as server:  # we sent no key: say how to send one
        with pytest.raises(ModelError, match="missing bearer token.*--api-key-env"):
            OpenAIChatModel("m", base_url=server.base_url, retry=RetryPolicy(max_attempts=1)).generate(HELLO)


# -- 6. prices only at the provider's own endpoint -----------------------------------------------------


def test_list_prices_apply_at_openai_only_else_the_users_price_or_unknown(user_env):
    with FakeOpenAIServer(default="ok:one two three") as server:
        unpriced = get_model("gpt-4.1-mini", base_url=server.base_url, retry=FAST).generate(HELLO)
        priced = get_model("gpt-4.1-mini", base_url=server.base_url, price="0.5,2", retry=FAST).generate(HELLO)
    assert unpriced.cost_usd is None
    assert priced.cost_usd == pytest.approx((2 * 0.5 + 3 * 2) / 1e6)
    assert endpoint_cost_usd("gpt-4.1-mini", "https://api.openai.com/v1", 1000, 10) == cost_usd(
        "gpt-4.1-mini", 1000, 10
    )
    assert endpoint_cost_usd("gpt-4.1-mini", "http://127.0.0.1:8000/v1", 1000, 10) is None
    for bad in ("abc", "1", "1,2,3", "-1,2"):
        with pytest.raises(ValueError, match="--price") as caught:
            get_model("gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", price=bad)
        assert "\n" not in str(caught.value)


# -- the schema grew: runs written before still load ----------------------------------------------------


def test_runs_written_before_the_new_columns_still_load(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tsbench.results import load_samples
    from tsbench.results.records import finish, new_record
    from tsbench.results.schema import ADDED_COLUMNS, COLUMNS

    record = finish(
        new_record(
            sample_id="a",
            epoch=0,
            family="anomalyxl",
            columns={"category": "presence"},
            model="m",
            harness="rlm",
            depth=0,
            gold={"answer": "Yes"},
        ),
        1.0,
    )
    record.update(score=1.0, valid=True, input_tokens=10, output_tokens=5, cost_usd=0.01)
    old = {k: v for k, v in record.items() if k not in ADDED_COLUMNS}
    old_schema = pa.schema([f for f in COLUMNS if f.name not in ADDED_COLUMNS])
    parquet_run, journal_run = tmp_path / "parquet", tmp_path / "journal"
    for run in (parquet_run, journal_run):
        run.mkdir()
        (run / schema.RUN_JSON).write_text(json.dumps({"model": "m", "harness": "rlm", "complete": True}))
    from tsbench.results.store import _typed

    pq.write_table(
        pa.Table.from_pylist([{k: _typed(old)[k] for k in old_schema.names}], schema=old_schema),
        parquet_run / schema.SAMPLES,
    )
    (journal_run / schema.JOURNAL).write_text(json.dumps(old, default=str) + "\n")
    for run in (parquet_run, journal_run):
        frame = load_samples(run)
        assert len(frame) == 1 and frame["score"].iloc[0] == 1.0
        assert all(name in frame and pd.isna(frame[name].iloc[0]) for name in ADDED_COLUMNS)
    rows, _, _ = load_results([parquet_run, journal_run])
    assert cost_table(rows)["cost_usd"].iloc[0] == pytest.approx(0.01)


# -- 7. impossible combinations refused in one line, before any episode ------------------------------


@pytest.mark.parametrize(
    "settings, needle",
    [
        (
            dict(model="vllm/Qwen/Qwen2.5-0.5B-Instruct", harness="tools", tool_protocol="native"),
            "native function calling",
        ),
        (dict(model="local/smollm2-135m", harness="tools-image", tool_protocol="native"), "native function calling"),
        (dict(model="local/smollm2-135m", harness="rlm-image"), "text only"),
        (dict(model="local/smollm2-135m", harness="single-pass-image"), "text only"),
    ],
)
def test_impossible_combinations_are_refused_before_any_episode(user_env, small_data, tmp_path, settings, needle):
    cfg = build(EvalConfig, dict(data=[str(small_data)], out=str(tmp_path / "run"), **settings))
    with pytest.raises(UserError, match=needle) as caught:
        run_eval(cfg)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "run").exists()


def test_the_cli_refuses_native_tools_for_vllm_with_exit_code_2(user_env, small_data, tmp_path):
    import sys

    result = readiness.run(
        [
            sys.executable,
            "-m",
            "tsbench.cli",
            "eval",
            "--model",
            "vllm/Qwen/Qwen2.5-0.5B-Instruct",
            "--harness",
            "tools",
            "--tool-protocol",
            "native",
            "--data",
            str(small_data),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert "native function calling" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
