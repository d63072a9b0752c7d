"""Issue 44, fault 1: every budget holds while work is in flight, not between steps.

A server that trickles its answer (a byte of JSON whitespace every interval, headers one byte at a
time, SSE keep-alives) or accepts and never answers held one request past the client timeout, the
retry budget and the episode's wall clock (still open when killed at 420 s): httpx's timeout is per
read. And a cell `while True: sub_rlm(...)` made 76-145 model requests past its cell timeout, the
wall clock and the token cap: sub_rlm's time was added to the cell's deadline and the caps ran
between turns. Each case here is a real run (a real server on 127.0.0.1, a real jailed kernel)
judged by how it ends: in time, as an error row that names the budget, and the run goes on.
Bounds are generous (a loaded machine must not fail them); what they rule out is "never ends".
"""

from __future__ import annotations

import time

import pytest

from jail_episode import FINAL, attack_task
from tsbench.core.deadline import within
from tsbench.harness import play
from tsbench.harness.rlm import RLMSettings
from tsbench.models.base import Completion, Message, ModelError
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.retry import RetryPolicy
from tsbench.testing.fake_openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(180)

SLOW_SHAPES = ["trickle:0.2", "slowheaders:0.2", "sse:0.2", "hang"]


def _model(server: FakeOpenAIServer, timeout_s: float, attempts: int) -> OpenAIChatModel:
    policy = RetryPolicy(max_attempts=attempts, base_delay_s=0.01, max_delay_s=0.01, max_total_s=5.0)
    return OpenAIChatModel("fake-model", base_url=server.base_url, api_key="k", timeout_s=timeout_s, retry=policy)


def test_deadlines_only_tighten_and_belong_to_their_thread():
    import threading

    from tsbench.core.deadline import remaining, tightest

    seen = []
    with within(10.0, "wall_clock"), within(100.0, "client_timeout"):
        assert tightest().budget == "wall_clock" and 9.0 < remaining() <= 10.0
        assert remaining(3.0) == 3.0
        worker = threading.Thread(target=lambda: seen.append((tightest(), remaining(5.0))))
        worker.start()
        worker.join()
        with within(None, "cell_timeout"):
            assert tightest().budget == "wall_clock"
    assert seen == [(None, 5.0)] and tightest() is None and remaining() is None


@pytest.mark.parametrize("shape", SLOW_SHAPES)
def test_a_slow_server_cannot_hold_a_call_past_its_total_time(shape):
    with FakeOpenAIServer([shape] * 4) as server:
        model = _model(server, timeout_s=1.0, attempts=2)
        began = time.monotonic()
        with pytest.raises(ModelError) as caught:
            model.generate([Message("user", "hi")])
        seconds = time.monotonic() - began
        model.close()
    assert caught.value.kind == "timeout" and caught.value.budget == "client_timeout"
    assert "total time of 1 s" in str(caught.value)
    assert caught.value.attempts == 2 and server.request_count == 2  # each attempt cut, then retried
    assert 1.9 < seconds < 15, seconds  # two attempts of 1 s each; per-read timeouts would never end


def test_the_callers_deadline_bounds_every_attempt_and_the_backoff():
    """Inside an episode's wall clock, retries stop with it: the budget is a total, named."""
    with FakeOpenAIServer(["trickle:0.2"] * 10) as server:
        model = _model(server, timeout_s=30.0, attempts=6)
        began = time.monotonic()
        with within(1.5, "wall_clock"), pytest.raises(ModelError) as caught:
            model.generate([Message("user", "hi")])
        seconds = time.monotonic() - began
        model.close()
    assert caught.value.budget == "wall_clock" and "episode's wall clock" in str(caught.value)
    assert seconds < 12, seconds
    assert server.request_count == 1  # no retry starts after the caller's time is spent


def test_retries_the_callers_deadline_leaves_no_time_for_are_not_started_and_it_is_named():
    with FakeOpenAIServer(["hang"] * 10) as server:
        policy = RetryPolicy(max_attempts=6, base_delay_s=5.0, max_delay_s=5.0, jitter=0.0)
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="k", timeout_s=1.0, retry=policy)
        with within(4.0, "wall_clock"), pytest.raises(ModelError) as caught:
            model.generate([Message("user", "hi")])
        model.close()
    assert caught.value.budget == "wall_clock" and server.request_count == 1  # a 5 s back-off does not fit


def test_a_slowloris_row_ends_as_a_wall_clock_error_and_the_run_goes_on(small_data, tmp_path, monkeypatch):
    import pandas as pd

    from tsbench.core.config import build
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    rows = ["test-localize-1024-00000", "test-localize-1024-00001"]
    with FakeOpenAIServer(["trickle:0.5"], default=f"ok:{FINAL}") as server:
        cfg = {
            "model": "openai/fake-model",
            "base_url": server.base_url,
            "harness": "single-pass-text",
            "data": [str(small_data)],
            "sample_ids": rows,
            "concurrency": 1,
            "client_timeout_s": 60.0,
            "episode_wall_s": 2.0,
            "out": str(tmp_path / "run"),
        }
        began = time.monotonic()
        run_eval(build(EvalConfig, cfg))
        seconds = time.monotonic() - began
    samples = pd.read_parquet(tmp_path / "run" / "samples.parquet").set_index("id")
    assert len(samples) == 2
    errors = samples["error_type"].dropna()
    assert list(errors) == ["wall_clock"], samples[["error_type", "error"]]
    assert "episode's wall clock" in errors.index.map(samples["error"].get)[0]
    assert samples["error_type"].isna().sum() == 1  # the other row was played and scored
    assert seconds < 60, seconds


# -- sub_rlm: its time is the cell's and the episode's, its tokens the row's ---------------------


class SubLoopChat:
    """The root episode replies with `root` code (then the final answer); every sub episode answers at
    once. Each reply reports `tokens` output tokens."""

    name = "test/sub-looper"

    def __init__(self, root: str, tokens: int = 1):
        self.root, self.tokens = root, tokens
        self.root_calls = self.sub_calls = 0

    def generate(self, messages, *, max_tokens=None, temperature=None, task=None) -> Completion:
        if messages[1].content == "sub question":
            self.sub_calls += 1
            text = "42"
        else:
            self.root_calls += 1
            text = f"```python\n{self.root}\n```" if self.root_calls == 1 else FINAL
        return Completion(text=text, input_tokens=1, output_tokens=self.tokens)


LOOP = "while True:\n    sub_rlm('sub question')"
TRY_LOOP = "while True:\n    try:\n        sub_rlm('sub question')\n    except Exception:\n        pass"


def _play(chat, **settings):
    cfg = RLMSettings(max_turns=3, depth=1, **settings)
    began = time.monotonic()
    outcome = play(chat, "rlm", attack_task(), cfg)
    return outcome, time.monotonic() - began


def test_sub_rlm_time_counts_against_the_cell_that_called_it():
    chat = SubLoopChat(TRY_LOOP)
    outcome, seconds = _play(chat, cell_timeout_s=4)
    assert outcome.error is None, outcome.error
    cells = [cell for entry in outcome.result.transcript if entry["role"] == "tool" for cell in entry["cells"]]
    assert cells[0]["timed_out"] and cells[0]["seconds"] < 30, cells
    assert outcome.result.final_message == FINAL  # the episode went on after the cut cell
    assert seconds < 60, seconds


def test_the_episode_wall_clock_ends_a_sub_rlm_loop():
    chat = SubLoopChat(TRY_LOOP)
    outcome, seconds = _play(chat, cell_timeout_s=300, episode_wall_s=4)
    assert outcome.error_type == "wall_clock", outcome.error
    assert seconds < 40, seconds
    assert chat.root_calls == 1


def test_the_token_cap_counts_sub_rlm_tokens_and_ends_the_loop():
    chat = SubLoopChat(TRY_LOOP, tokens=10)
    outcome, seconds = _play(chat, cell_timeout_s=300, episode_token_cap=45)
    assert outcome.error_type == "token_cap", outcome.error
    assert "sub_rlm" in outcome.error
    assert chat.sub_calls <= 4  # 11 tokens a call: the cap of 45 is reached at the 4th, not past it
    assert outcome.result.sub_calls >= 3 and outcome.result.calls  # what the sub episodes spent is the row's
    assert seconds < 60, seconds


def test_sub_rlm_calls_have_their_own_cap():
    code = "done = 0\ntry:\n    while True:\n        sub_rlm('sub question')\n        done += 1\nexcept Exception as e:\n    print(done, e)"
    chat = SubLoopChat(code)
    outcome, _ = _play(chat, cell_timeout_s=300, max_sub_rlm_calls=2)
    assert outcome.error is None, outcome.error
    observation = next(entry["observation"] for entry in outcome.result.transcript if entry["role"] == "tool")
    assert "2 sub_rlm failed: RuntimeError: refused: this episode's 2 sub_rlm calls are spent" in observation
    assert chat.sub_calls == 2 and outcome.result.attributes["sub_rlm_refused"] == "1"
