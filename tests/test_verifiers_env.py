"""A task family as a `verifiers` environment (issue 25): loaded with the installed verifiers, one rollout
through verifiers' own episode machinery (its interception server in front of a FakeOpenAIServer on
127.0.0.1), the reward being the family scorer's score of the reply."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

vf = pytest.importorskip(  # make setup installs it (Makefile: verifiers 0.4.0 pins openai<3, so without its deps)
    "verifiers.v1",
    reason="verifiers is not installed: pip install 'tsbench[verifiers]' && pip install --no-deps verifiers==0.4.0",
)

from tsbench.core.errors import UserError  # noqa: E402
from tsbench.harness import HarnessSettings, play  # noqa: E402
from tsbench.harness.runtime import check_jail  # noqa: E402
from tsbench.harness.runtime.sandbox import SandboxError  # noqa: E402
from tsbench.interop.verifiers_env import MODULE, load_environment  # noqa: E402
from tsbench.models.openai_model import OpenAIChatModel  # noqa: E402
from tsbench.tasks import get_taskset  # noqa: E402
from tsbench.tasks.base import SampleRef  # noqa: E402
from tsbench.testing.fake_openai_server import FakeOpenAIServer  # noqa: E402

KEY_VAR = "TSBENCH_VF_TEST_KEY"


def one_rollout(env, server: FakeOpenAIServer, monkeypatch):
    """The first task of the env, played once the way vf-eval plays it (serving, then a run slot)."""
    monkeypatch.setenv(KEY_VAR, "key-for-the-fake")
    task = next(iter(env.taskset))
    ctx = vf.ModelContext(model="fake-model", client=vf.EvalClientConfig(base_url=server.base_url, api_key_var=KEY_VAR))

    async def run():
        async with env.serving():
            return await env.run_slot(env.slots(task)[0], ctx)

    episode = asyncio.run(run())
    return task, episode, episode.traces[0]


def test_the_verifiers_plugin_resolves_to_tsbench_classes(small_data):
    env = load_environment(family="anomalyxl", data=str(small_data), split="test", limit=3)
    assert type(env).__name__ == "SingleAgentEnv" and env.config.taskset.id == MODULE
    assert type(env.taskset).__name__ == "TsbenchTaskset" and type(env._harnesses["agent"]).__name__ == "TsbenchHarness"
    tasks = list(env.taskset)
    per_category = Counter(t.data.category for t in tasks)
    assert set(per_category) == set(
        get_taskset("anomalyxl").index(sorted(small_data.glob("test-*.parquet")), {})["category"]
    )
    assert max(per_category.values()) == 3  # `--limit` as tsbench eval reads it: a seeded draw per stratum
    with pytest.raises(UserError, match="unknown harness 'no-such-harness'"):  # one line, at load
        load_environment(family="anomalyxl", data=str(small_data), split="test", harness="no-such-harness")
    with pytest.raises(UserError, match="did you mean max_turns"):
        load_environment(family="anomalyxl", data=str(small_data), split="test", max_turnz=3)


@pytest.mark.parametrize("reply", ['{"answer": "Yes"}', '{"answer": "No"}', "no json"])
def test_one_single_pass_rollout_is_scored_by_the_family_scorer(small_data, monkeypatch, reply):
    env = load_environment(family="anomalyxl", data=str(small_data), split="test", categories=["presence"], limit=1)
    with FakeOpenAIServer(default=f"ok:{reply}") as server:
        task, episode, trace = one_rollout(env, server, monkeypatch)
    assert episode.ok and not trace.errors
    assert {h["authorization"] for h in server.headers} == {"Bearer key-for-the-fake"}  # verifiers' client, upstream
    played = trace.info["tsbench"]
    assert played["final_message"] == reply and played["error_type"] is None
    want = get_taskset("anomalyxl").score(task.data.category, json.loads(task.data.gold), reply).score
    assert trace.rewards["family_score"].score == pytest.approx(want)
    assert len(trace.calls) == 1  # the model call went through verifiers' interception and is on the trace
    with FakeOpenAIServer(default=f"ok:{reply}") as direct:  # the same row played by tsbench itself
        sample = get_taskset("anomalyxl").load(SampleRef("anomalyxl", task.data.path, task.data.id))
        play(
            OpenAIChatModel("fake-model", base_url=direct.base_url), "single-pass-text", sample.task, HarnessSettings()
        )
    assert server.bodies[0]["messages"] == direct.bodies[0]["messages"]  # the same prompt, word for word


def test_an_rlm_rollout_runs_in_the_jail_and_is_scored(small_data, monkeypatch):
    try:
        check_jail()
    except SandboxError as exc:
        pytest.skip(f"no bubblewrap jail here: {exc}")
    env = load_environment(
        family="anomalyxl",
        data=str(small_data),
        split="test",
        harness="rlm",
        categories=["presence"],
        limit=1,
        max_turns=3,
    )
    script = ["ok:```python\nprint(len(channels))\n```", 'ok:{"answer": "Yes"}']
    with FakeOpenAIServer(script=script, default='ok:{"answer": "Yes"}') as server:
        task, episode, trace = one_rollout(env, server, monkeypatch)
    assert episode.ok and not trace.errors
    played = trace.info["tsbench"]
    assert played["turns"] == 2 and played["final_message"] == '{"answer": "Yes"}'
    want = get_taskset("anomalyxl").score(task.data.category, json.loads(task.data.gold), '{"answer": "Yes"}').score
    assert trace.rewards["family_score"].score == pytest.approx(want)
    assert len(trace.calls) == 2
