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
from tsbench.interop.verifiers_env import MODULE, environment_config, load_environment, stream_request  # noqa: E402
from tsbench.models.openai_model import OpenAIChatModel  # noqa: E402
from tsbench.tasks import get_taskset  # noqa: E402
from tsbench.tasks.base import SampleRef  # noqa: E402
from tsbench.testing import readiness  # noqa: E402
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
    env = load_environment(environment_config(family="anomalyxl", data=str(small_data), split="test", limit=3))
    assert type(env).__name__ == "TsbenchEnv" and env.config.taskset.id == MODULE  # verifiers' loader picks it
    assert type(env.taskset).__name__ == "TsbenchTaskset" and type(env._harnesses["agent"]).__name__ == "TsbenchHarness"
    assert len(list(env.taskset)) == 3  # `--limit` as tsbench eval and inspect read it: rows in all
    every = list(load_environment(environment_config(family="anomalyxl", data=str(small_data), split="test")).taskset)
    per_category = Counter(t.data.category for t in every)
    assert set(per_category) == set(
        get_taskset("anomalyxl").index(sorted(small_data.glob("test-*.parquet")), {})["category"]
    )
    with pytest.raises(UserError, match="unknown harness 'no-such-harness'"):  # one line, at load
        load_environment(
            environment_config(family="anomalyxl", data=str(small_data), split="test", harness="no-such-harness")
        )
    with pytest.raises(UserError, match="did you mean max_turns"):
        load_environment(environment_config(family="anomalyxl", data=str(small_data), split="test", max_turnz=3))


@pytest.mark.parametrize("reply", ['{"answer": "Yes"}', '{"answer": "No"}', "no json"])
def test_one_single_pass_rollout_is_scored_by_the_family_scorer(small_data, monkeypatch, reply):
    env = load_environment(
        environment_config(family="anomalyxl", data=str(small_data), split="test", categories=["presence"], limit=1)
    )
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
        environment_config(
            family="anomalyxl",
            data=str(small_data),
            split="test",
            harness="rlm",
            categories=["presence"],
            limit=1,
            max_turns=3,
        )
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


def test_the_papers_penalties_are_set_against_the_group(small_data, monkeypatch):
    """G attempts of one task in one episode; finalize adds -lambda_tok s kappa and -lambda_fail 1[forced],
    kappa relative to the longest attempt, as train-grpo's reward (train/rewards.py) computes it."""
    env = load_environment(
        environment_config(
            family="anomalyxl", data=str(small_data), split="test", categories=["presence"], limit=1, group_size=2
        )
    )
    task = next(iter(env.taskset))
    right = json.dumps({"answer": json.loads(task.data.gold)["answer"]})
    with FakeOpenAIServer(
        script=[f"ok:{right}", f"ok:{right} and then some more words"], default=f"ok:{right}"
    ) as server:
        _, episode, _ = one_rollout(env, server, monkeypatch)
    traces = episode.traces
    assert len(traces) == 2 and all(t.rewards["family_score"].score == 1.0 for t in traces)
    tokens = [t.info["tsbench"]["generated_tokens"] for t in traces]
    kappas = [t.metrics["kappa"] for t in traces]
    assert max(kappas) == 1.0 and kappas == [n / max(tokens) for n in tokens] and min(kappas) < 1.0
    for trace, kappa in zip(traces, kappas):
        assert trace.rewards["token_cost"].value == pytest.approx(-0.1 * kappa)  # its weight: lambda_tok 0.1
        assert trace.rewards["forced_final"].value == 0.0
        assert trace.reward == pytest.approx(1.0 - 0.1 * kappa)


def test_the_training_stream_with_its_curriculum_is_the_taskset():
    """source = stream: AnomalyXL's generator tasks, step by step, exactly the tasks train-grpo draws."""
    from tsbench.tasks import get_taskset
    from tsbench.train.curriculum import parse_key

    config = environment_config(
        family="anomalyxl",
        stream={"steps": 4, "tasks_per_step": 2, "curriculum_fraction": 0.5, "preset": "small", "lengths": [256]},
    )
    tasks = list(load_environment(config).taskset)
    assert len(tasks) == 8
    assert [t.data.key for t in tasks[:3]] == ["step-000001/task-00", "step-000001/task-01", "step-000002/task-00"]
    request = stream_request(config.taskset)
    assert request.warm_steps == 2  # the curriculum's cut-over, as train-grpo computes it
    stream = get_taskset("anomalyxl").training_stream(request)
    for task in tasks:
        sample = stream.sample(*parse_key(task.data.key))
        assert (task.data.id, task.data.category) == (sample.ref.id, sample.task.category)


def test_vf_eval_plays_the_environment_against_a_loopback_server(small_data, tmp_path):
    """verifiers' own CLI (vf-eval in 0.4.0), its plugin id the taskset: 2 tasks x a group of 2 attempts each,
    every model call to a FakeOpenAIServer on 127.0.0.1, each trace carrying the paper's three reward parts."""
    import os
    import sys

    reply = '{"answer": "Yes"}'
    with FakeOpenAIServer(default=f"ok:{reply}") as server:
        command = [sys.executable, "-c", "from verifiers.v1.cli.eval.main import main; main()", MODULE]
        command += ["--env.taskset.family", "anomalyxl", "--env.taskset.data", str(small_data)]
        command += ["--env.taskset.split", "test", "--env.taskset.limit", "2", "--env.group-size", "2"]
        command += ["--env.agent.runtime.type", "subprocess", "-m", "fake-model", "-n", "2", "--no-rich", "--no-push"]
        command += ["--client.base-url", server.base_url, "--client.api-key-var", KEY_VAR, "-o", str(tmp_path / "out")]
        done = readiness.run(command, capture_output=True, text=True, env={**os.environ, KEY_VAR: "key-for-the-fake"})
    assert done.returncode == 0, done.stderr[-3000:]
    (traces_file,) = (tmp_path / "out").glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces_file.read_text().splitlines()]
    assert len(episodes) == 2 and all(len(e["traces"]) == 2 for e in episodes)  # a group of 2 in each episode
    assert len(server.bodies) == 4  # every attempt's one model call reached the loopback server
    for episode in episodes:
        data = episode["task"]["data"]
        want = get_taskset("anomalyxl").score(data["category"], json.loads(data["gold"]), reply).score
        for trace in episode["traces"]:
            assert set(trace["rewards"]) == {"family_score", "token_cost", "forced_final"}
            assert trace["rewards"]["family_score"]["score"] == pytest.approx(want)
            assert (trace["rewards"]["token_cost"]["weight"], trace["rewards"]["forced_final"]["weight"]) == (0.1, 0.25)
