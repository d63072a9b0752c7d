"""The OpenAI-compatible model against a real loopback server (fake_openai_server), plus pure retry tests."""

from __future__ import annotations

import base64
import random
import threading

import pytest

from tsbench.models.base import ChatModel, Completion, Message, ModelError
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.pricing import cost_usd, price_for
from tsbench.models.registry import get_model, split_spec
from tsbench.models.retry import RetryPolicy, call_with_retries
from tsbench.models.vllm_server import NOT_INSTALLED, VLLMNotInstalledError, openai_base_url, vllm_installed
from tsbench.testing.fake_openai_server import FakeOpenAIServer

FAST_RETRY = RetryPolicy(
    max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, max_total_s=10.0, rate_limit_base_delay_s=0.02
)
HELLO = [Message("user", "say hello")]
# A 1x1 PNG, as the image renderer would hand over.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


@pytest.fixture
def no_openai_env(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VLLM_BASE_URL", "VLLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def model_for(server: FakeOpenAIServer, name: str = "gpt-4.1-mini", **options) -> OpenAIChatModel:
    options.setdefault("retry", FAST_RETRY)
    return OpenAIChatModel(name, base_url=server.base_url, api_key="test-key", **options)


# -- calls through the real client -------------------------------------------------------------------


def test_call_returns_text_tokens_latency_and_cost(no_openai_env):
    with FakeOpenAIServer(["ok:hello there friend"], latency_s=0.05) as server:
        model = model_for(server)
        completion = model.generate(HELLO, max_tokens=20, temperature=0.0)
        model.close()
    assert completion.text == "hello there friend"
    assert completion.input_tokens == 2 and completion.output_tokens == 3
    assert completion.latency_s >= 0.05
    assert completion.cost_usd is None  # OpenAI's list price is not this loopback server's (pricing.py)
    assert completion.extra["attempts"] == 1
    body = server.bodies[0]
    assert body["model"] == "gpt-4.1-mini"
    assert body["messages"] == [{"role": "user", "content": "say hello"}]
    assert body["max_tokens"] == 20 and body["temperature"] == 0.0
    assert server.headers[0]["authorization"] == "Bearer test-key"


def test_rate_limit_then_ok_is_retried(no_openai_env):
    with FakeOpenAIServer(["429", "ok:done"]) as server:
        completion = model_for(server).generate(HELLO)
    assert completion.text == "done"
    assert completion.extra["attempts"] == 2
    assert server.request_count == 2


def test_rate_limit_carries_the_retry_after_hint(no_openai_env):
    with FakeOpenAIServer(["429:0.05"]) as server:
        with pytest.raises(ModelError) as caught:
            model_for(server, retry=RetryPolicy(max_attempts=1)).generate(HELLO)
    assert caught.value.kind == "rate_limit" and caught.value.status_code == 429
    assert caught.value.retry_after_s == pytest.approx(0.05)


def test_server_errors_exhaust_max_attempts(no_openai_env):
    with FakeOpenAIServer(["500"] * 10) as server:
        with pytest.raises(ModelError) as caught:
            model_for(server).generate(HELLO)
    assert caught.value.kind == "server"
    assert caught.value.status_code == 500
    assert caught.value.attempts == FAST_RETRY.max_attempts
    assert server.request_count == FAST_RETRY.max_attempts


def test_timeout_then_ok(no_openai_env):
    with FakeOpenAIServer(["sleep:3", "ok:in time"]) as server:
        completion = model_for(server, timeout_s=0.3).generate(HELLO)
    assert completion.text == "in time"
    assert completion.extra["attempts"] == 2


def test_timeouts_exhausted_raise_timeout_kind(no_openai_env):
    retry = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.01, rate_limit_base_delay_s=0.01)
    with FakeOpenAIServer(["sleep:3", "sleep:3"]) as server:
        with pytest.raises(ModelError) as caught:
            model_for(server, timeout_s=0.2, retry=retry).generate(HELLO)
    assert caught.value.kind == "timeout" and caught.value.attempts == 2


def test_bad_request_is_not_retried(no_openai_env):
    with FakeOpenAIServer(["400", "ok:never"]) as server:
        with pytest.raises(ModelError) as caught:
            model_for(server).generate(HELLO)
    assert caught.value.kind == "bad_request" and caught.value.attempts == 1
    assert server.request_count == 1


def test_connection_refused_is_a_connection_error(no_openai_env):
    with FakeOpenAIServer() as server:
        base_url = server.base_url
    retry = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.01)
    model = OpenAIChatModel("m", base_url=base_url, api_key="k", retry=retry)
    with pytest.raises(ModelError) as caught:
        model.generate(HELLO)
    assert caught.value.kind == "connection" and caught.value.attempts == 2


# -- fault injection: a 200 without an answer is a server failure, retried with the bound -------------


@pytest.mark.parametrize(
    "fault, needle",
    [
        ("empty_choices", "no choices"),
        ("ok", "empty reply"),  # empty content and no tool call
        ("bad_json", "malformed JSON body"),
    ],
)
def test_answerless_200s_are_retried_then_raised_as_server_errors(no_openai_env, fault, needle):
    with FakeOpenAIServer([fault, "ok:recovered"]) as server:
        completion = model_for(server).generate(HELLO)
    assert completion.text == "recovered" and completion.extra["attempts"] == 2
    with FakeOpenAIServer(default=fault) as server:
        with pytest.raises(ModelError) as caught:
            model_for(server).generate(HELLO)
    assert caught.value.kind == "server" and needle in str(caught.value)
    assert caught.value.attempts == server.request_count == FAST_RETRY.max_attempts


def test_a_dropped_connection_and_a_hang_are_retried(no_openai_env):
    with FakeOpenAIServer(["drop", "hang", "ok:made it"]) as server:
        completion = model_for(server, timeout_s=0.3).generate(HELLO)
    assert completion.text == "made it" and completion.extra["attempts"] == 3


def test_a_tool_call_without_text_is_a_reply_not_an_error(no_openai_env):
    with FakeOpenAIServer(['tool:run_python:{"code": "1"}']) as server:
        completion = model_for(server).generate(HELLO, tools=[{"type": "function", "function": {"name": "run_python"}}])
    assert completion.text == "" and completion.tool_calls[0].name == "run_python"
    assert completion.extra["attempts"] == 1


def test_retries_log_the_url_and_the_attempt_count(no_openai_env, caplog):
    with FakeOpenAIServer(["500", "429", "ok:fine"]) as server:
        url = f"{server.base_url}/chat/completions"
        with caplog.at_level("WARNING", logger="tsbench.models.retry"):
            model_for(server).generate(HELLO)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert all(url in line for line in lines)
    assert f"attempt 1 of {FAST_RETRY.max_attempts}" in lines[0] and "HTTP 500" in lines[0]
    assert f"attempt 2 of {FAST_RETRY.max_attempts}" in lines[1] and "rate_limit" in lines[1]


def test_images_arrive_as_png_data_urls(no_openai_env):
    messages = [Message("system", "you read charts"), Message("user", "what trend?", images=[PNG, PNG])]
    with FakeOpenAIServer(["ok:up"]) as server:
        model_for(server, name="gpt-4o").generate(messages)
    system, user = server.bodies[0]["messages"]
    assert system == {"role": "system", "content": "you read charts"}
    assert user["content"][0] == {"type": "text", "text": "what trend?"}
    images = user["content"][1:]
    assert len(images) == 2
    prefix = "data:image/png;base64,"
    for part in images:
        assert part["type"] == "image_url"
        url = part["image_url"]["url"]
        assert url.startswith(prefix) and base64.b64decode(url[len(prefix) :]) == PNG


def test_extra_body_is_sent(no_openai_env):
    with FakeOpenAIServer(["ok:x"]) as server:
        model_for(server, extra_body={"top_k": 5}).generate(HELLO)
    assert server.bodies[0]["top_k"] == 5


def test_concurrent_calls_share_one_client(no_openai_env):
    with FakeOpenAIServer(default="ok:fine", latency_s=0.2) as server:
        model = model_for(server)
        results: list[Completion] = []
        threads = [threading.Thread(target=lambda: results.append(model.generate(HELLO))) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [c.text for c in results] == ["fine"] * 4
    assert server.max_in_flight > 1


# -- registry and configuration --------------------------------------------------------------------


def test_bare_name_means_openai(no_openai_env):
    assert split_spec("gpt-4.1-mini") == ("openai", "gpt-4.1-mini")
    assert split_spec("vllm/Qwen/Qwen2.5-7B-Instruct") == ("vllm", "Qwen/Qwen2.5-7B-Instruct")
    with FakeOpenAIServer(["ok:hi"]) as server:
        model = get_model("gpt-4.1-mini", base_url=server.base_url, api_key="k", retry=FAST_RETRY, device=None)
        assert isinstance(model, OpenAIChatModel) and isinstance(model, ChatModel)
        assert model.name == "openai/gpt-4.1-mini" and model.model_name == "gpt-4.1-mini"
        assert model.generate(HELLO).text == "hi"
    assert server.bodies[0]["model"] == "gpt-4.1-mini"


def test_openai_base_url_from_environment(monkeypatch, no_openai_env):
    with FakeOpenAIServer(["ok:env"]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        model = get_model("openai/some-model", retry=FAST_RETRY)
        completion = model.generate(HELLO)
    assert completion.text == "env"
    assert completion.cost_usd is None  # unknown model: no price, not zero
    assert server.headers[0]["authorization"] == "Bearer EMPTY"  # no key + custom server


def test_missing_key_for_openai_is_one_clear_line(no_openai_env):
    with pytest.raises(ValueError, match="OPENAI_API_KEY") as caught:
        get_model("gpt-4.1-mini")
    assert "\n" not in str(caught.value)


def test_registry_rejects_unknown_things(no_openai_env):
    with pytest.raises(ValueError, match="unknown model provider"):
        get_model("meta-llama/Llama-3-8B")
    with pytest.raises(ValueError, match="do not apply"):
        get_model("gpt-4.1-mini", api_key="k", max_new_tokens=3)
    with pytest.raises(ValueError, match="unknown model provider"):  # reference policies are not models
        get_model("scripted/zscore")


def test_reference_policies_are_built_apart_from_models():
    from tsbench.baselines import build_policy

    with pytest.raises(ValueError, match="unknown reference policy 'scripted/no-such-policy-anywhere'"):
        build_policy("scripted/no-such-policy-anywhere")
    assert build_policy("scripted-cik/persistence").name == "scripted/cik-persistence"  # an old spelling
    with pytest.raises(ValueError, match="unknown detector policy"):
        build_policy("detector/no-such-detector-anywhere")
    assert build_policy("detector/default").harnesses() == ("direct",)


# -- vLLM -------------------------------------------------------------------------------------------


@pytest.mark.skipif(vllm_installed(), reason="vLLM is installed here")
def test_vllm_missing_is_one_clear_line(no_openai_env):
    with pytest.raises(VLLMNotInstalledError) as caught:  # a ValueError: the CLI shows it as one line
        get_model("vllm/Qwen/Qwen2.5-0.5B-Instruct")
    assert str(caught.value) == NOT_INSTALLED == "vLLM is not installed: pip install 'tsbench[gpu]'"
    assert isinstance(caught.value, ValueError)


def test_vllm_reuses_server_at_vllm_base_url(monkeypatch, no_openai_env):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    with FakeOpenAIServer(["ok:from vllm"]) as server:
        monkeypatch.setenv("VLLM_BASE_URL", server.url)  # a server root: /v1 is added
        model = get_model("vllm/Qwen/Qwen2.5-0.5B-Instruct", retry=FAST_RETRY)
        completion = model.generate(HELLO, max_tokens=8)
        model.close()
    assert model.name == "vllm/Qwen/Qwen2.5-0.5B-Instruct" and isinstance(model, ChatModel)
    assert completion.text == "from vllm"
    assert server.bodies[0]["model"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert server.bodies[0]["max_tokens"] == 8
    assert server.headers[0]["authorization"] == "Bearer EMPTY"


def test_openai_base_url_normalisation():
    assert openai_base_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert openai_base_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"


# -- pricing ----------------------------------------------------------------------------------------


def test_cost_for_known_and_unknown_models():
    input_price, output_price = price_for("gpt-4.1-mini")
    assert cost_usd("gpt-4.1-mini", 1_000_000, 1_000_000) == pytest.approx(input_price + output_price)
    assert cost_usd("gpt-4.1-mini-2025-04-14", 1000, 0) == pytest.approx(input_price / 1000)
    assert cost_usd("openai/gpt-4o", 0, 1_000_000) == pytest.approx(price_for("gpt-4o")[1])
    assert cost_usd("my-local-model", 10, 10) is None


def test_every_api_model_the_shipped_configs_use_has_a_price():
    import tomllib
    from pathlib import Path

    configs = Path(__file__).resolve().parents[1].glob("experiments/**/*.toml")
    models = {tomllib.loads(p.read_text()).get("eval", {}).get("model", "") for p in configs}
    api = {m for m in models if m and split_spec(m)[0] == "openai"}
    assert "gpt-5.5" in api and "gpt-4.1-mini" in api
    assert {m: price_for(m) for m in api if price_for(m) is None} == {}
    assert cost_usd("gpt-5.5", 100_000, 10_000) == pytest.approx(100_000 * 5.00 / 1e6 + 10_000 * 30.00 / 1e6)
    # Past 272k prompt tokens the whole request is billed at the long-context rates.
    assert cost_usd("gpt-5.5", 300_000, 1_000) == pytest.approx(300_000 * 10.00 / 1e6 + 1_000 * 45.00 / 1e6)


# -- retry policy, pure ----------------------------------------------------------------------------


def test_rate_limit_backs_off_longer_than_server_errors():
    policy = RetryPolicy(base_delay_s=1.0, rate_limit_base_delay_s=5.0, max_delay_s=60.0, jitter=0.0)
    assert [policy.delay_for(a, "server") for a in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert [policy.delay_for(a, "rate_limit") for a in (1, 2, 3)] == [5.0, 10.0, 20.0]


def test_delays_are_capped_and_jittered_below_the_ceiling():
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0, jitter=1.0)
    rng = random.Random(7)
    delays = [policy.delay_for(10, "server", rng) for _ in range(200)]
    assert all(0.0 <= d <= 8.0 for d in delays)
    assert len(set(delays)) > 100  # actually random
    assert RetryPolicy(base_delay_s=1.0, max_delay_s=8.0, jitter=0.0).delay_for(10, "timeout") == 8.0


def test_retry_after_hint_is_honoured_up_to_the_cap():
    policy = RetryPolicy(rate_limit_base_delay_s=0.1, max_delay_s=30.0, jitter=0.0)
    assert policy.delay_for(1, "rate_limit", retry_after_s=12.0) == 12.0
    assert policy.delay_for(1, "rate_limit", retry_after_s=600.0) == 30.0


class FakeTime:
    """A clock that only moves when slept on."""

    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def failing(kinds: list[str], then: Completion | None = None):
    remaining = list(kinds)

    def call() -> Completion:
        if remaining:
            raise ModelError(remaining.pop(0), "scripted")
        assert then is not None
        return then

    return call


def test_total_time_cap_stops_before_attempts_run_out():
    policy = RetryPolicy(max_attempts=20, base_delay_s=10.0, max_delay_s=10.0, max_total_s=35.0, jitter=0.0)
    fake = FakeTime()
    with pytest.raises(ModelError) as caught:
        call_with_retries(failing(["server"] * 20), policy, sleep=fake.sleep, clock=fake.clock)
    assert fake.sleeps == [10.0, 10.0, 10.0]
    assert caught.value.attempts == 4


def test_success_after_retries_records_attempts_and_wait():
    policy = RetryPolicy(base_delay_s=1.0, rate_limit_base_delay_s=3.0, jitter=0.0)
    fake = FakeTime()
    result = call_with_retries(
        failing(["rate_limit", "connection"], Completion("ok")), policy, sleep=fake.sleep, clock=fake.clock
    )
    assert result.text == "ok"
    assert fake.sleeps == [3.0, 2.0]
    assert result.extra["attempts"] == 3 and result.extra["retry_wait_s"] == 5.0


def test_non_transient_errors_and_bugs_are_not_retried():
    fake = FakeTime()
    with pytest.raises(ModelError) as caught:
        call_with_retries(failing(["bad_request"]), RetryPolicy(), sleep=fake.sleep, clock=fake.clock)
    assert caught.value.attempts == 1 and fake.sleeps == []

    def buggy() -> Completion:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        call_with_retries(buggy, RetryPolicy(), sleep=fake.sleep, clock=fake.clock)
    assert fake.sleeps == []
