"""Any task family as a `verifiers` (0.4.0) environment, for trainers built on it (prime-rl, vf-eval).

    import verifiers.v1 as vf
    from tsbench.interop.verifiers_env import environment_config, load_environment
    env = load_environment(environment_config(family="anomalyxl", source="stream", harness="rlm", steps=300))
    vf-eval tsbench-verifiers --env.taskset.family anomalyxl --env.taskset.source stream ...
        --env.agent.runtime.type subprocess --env.agent.harness.play rlm ...

`load_environment(config)` is verifiers' own loader convention: it takes the run's `EnvConfig` and
builds what verifiers' `load_environment` builds from it (the taskset's package exports the `Env`
subclass, so verifiers picks it without an `--env.id`). The environment carries the paper's reward
(timerlm-anomalyxl §4.1): the family's score s, the token cost -lambda_tok s kappa (kappa = T / max T
over the G attempts of one task, T the tokens the policy generated) and the forced-final penalty
-lambda_fail, as weighted rewards on each trace; one episode plays a task's G attempts
(`group_size`) and `finalize` sets their penalties against each other (train/rewards.py's pure
functions, the ones train-grpo uses). With `source = "stream"` the tasks are the family's training
stream (AnomalyXL: fresh generator tasks, anomaly-free cases withheld for the warm phase of the
curriculum, step by step), else the rows of a split.

verifiers (v1) finds a plugin by importing the top-level package its `--env.taskset.id` names and
taking the `Taskset` and `Harness` subclasses in its `__all__`: `tsbench-verifiers` is the package
`tsbench_verifiers`, which re-exports this module's. The taskset yields the
family's rows (`resolve` + `select_rows`, as `tsbench eval` selects them). The harness plays each row
in-process with tsbench's own `play()`: the same harness, prompts, caps and bubblewrap jail as
`tsbench eval` and train-grpo, its agent an OpenAI-wire client on the endpoint verifiers hands every
harness (its interception server, which records each model call on the trace). The reward is the
family's scorer on the episode's final message; an episode that ended in an error (a cap, the jail)
scores 0 with its error kept in `trace.info["tsbench"]`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.runtimes import ProgramResult

from tsbench.core import json_input
from tsbench.eval.selection import select_rows
from tsbench.harness import get_harness, harness_settings, play, require_jail
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.tasks import get_taskset
from tsbench.tasks.base import SampleRef, TrainingRequest
from tsbench.train.curriculum import parse_key, task_key
from tsbench.train.rewards import LAMBDA_FAIL, LAMBDA_TOK, penalised_rewards

MODULE = "tsbench-verifiers"  # the plugin id: verifiers imports it as the package tsbench_verifiers


class TsbenchTaskData(vf.TaskData):
    """One family row (where it lives: the harness loads its series when it plays it) or one task of the
    family's training stream (its key and the stream's request: the harness draws it again), and its gold."""

    family: str
    path: str = ""
    category: str
    gold: str  # JSON, as the results store it
    key: str = ""  # a training stream's task key ("step-000001/task-00"); "" for a row
    request: str = ""  # the stream's TrainingRequest as JSON


class TsbenchTaskConfig(vf.TaskConfig):
    pass


class TsbenchTask(vf.Task[TsbenchTaskData, vf.State, TsbenchTaskConfig]):
    """A row scored by its family's scorer."""

    @property
    def key(self) -> str:
        return f"{self.data.family}/{self.data.id}"

    @vf.reward
    async def family_score(self, task: TsbenchTaskData, trace: vf.Trace) -> float:
        played = trace.info.get("tsbench") or {}
        if played.get("final_message") is None:  # the episode ended in an error: no answer to score
            return 0.0
        scored = get_taskset(task.family).score(
            task.category, json_input.loads(task.gold, "the task gold"), played["final_message"]
        )
        trace.info["tsbench"].update(valid=scored.valid, answer_error=scored.error)
        return float(scored.score)


class TsbenchTasksetConfig(vf.TasksetConfig):
    family: str = "anomalyxl"
    """The task family (a name, or module:attribute)."""
    data: list[str] = Field(default_factory=list)
    """Dataset folders or files; empty: the family's default location."""
    split: str = "train"
    """The split whose rows are the tasks."""
    seed: int = 42
    """The dataset seed (generator families) and the row sampling seed."""
    categories: list[str] | None = None
    """Only these categories; None: every category."""
    limit: int | None = None
    """Rows in all, spread over the categories and strata: a seeded draw exactly as `tsbench eval --limit` makes it."""
    source: str = "rows"
    """rows: a split's rows, as `tsbench eval` selects them; stream: the family's training stream, as train-grpo draws it."""
    steps: int = 300
    """stream: steps of the curriculum (tasks_per_step tasks each)."""
    tasks_per_step: int = 16
    """stream: tasks per step."""
    curriculum_fraction: float = 220 / 300
    """stream: share of the steps that are the curriculum's warm phase (AnomalyXL: no anomaly-free cases)."""
    preset: str | None = None
    """stream, generator families: the grid (AnomalyXL: paper or small)."""
    lengths: list[int] | None = None
    """stream, generator families: series lengths [the preset's]."""


class TsbenchTaskset(vf.Taskset[TsbenchTask, TsbenchTasksetConfig]):
    """The family's rows of one split, as `tsbench eval` selects them, or its training stream."""

    def load(self):
        c = self.config
        family = get_taskset(c.family)
        if c.source == "stream":
            yield from self._stream(family)
            return
        files = family.resolve(list(c.data), seed=c.seed, split=c.split, root=None, filters={})
        rows = select_rows(family, files, categories=c.categories, sample_ids=None, limit=c.limit, seed=c.seed)
        for row in rows.to_dict("records"):
            data = TsbenchTaskData(
                id=str(row["id"]),
                prompt=str(row.get("question") or row["id"]),
                family=c.family,
                path=str(row["path"]),
                category=str(row["category"]),
                gold=_gold_text(row["gold"]),
            )
            yield TsbenchTask(data, c.task)

    def _stream(self, family):
        """Task j of step s of the family's training stream, in order: the curriculum as train-grpo runs it."""
        c = self.config
        request = stream_request(c)
        stream = family.training_stream(request)
        text = json.dumps(dataclasses.asdict(request), sort_keys=True)
        for step in range(1, c.steps + 1):
            for j in range(c.tasks_per_step):
                sample = stream.sample(step, j)
                data = TsbenchTaskData(
                    id=sample.ref.id,
                    prompt=sample.task.question,
                    family=c.family,
                    category=sample.task.category,
                    gold=_gold_text(sample.gold),
                    key=task_key(step, j),
                    request=text,
                )
                yield TsbenchTask(data, c.task)


def stream_request(c: TsbenchTasksetConfig) -> TrainingRequest:
    options = {k: v for k, v in (("preset", c.preset), ("lengths", c.lengths)) if v is not None}
    return TrainingRequest(
        seed=c.seed,
        steps=c.steps,
        tasks_per_step=c.tasks_per_step,
        data=tuple(c.data),
        categories=tuple(c.categories) if c.categories else None,
        warm_steps=int(round(c.steps * c.curriculum_fraction)),
        options=options,
    )


def _gold_text(gold: Any) -> str:
    return gold if isinstance(gold, str) else json.dumps(gold, sort_keys=True, default=str)


@functools.cache
def _stream_of(family: str, request: str) -> Any:
    """The training stream a task's request names (one per request, built once per process)."""
    fields = json_input.loads(request, "the task request")
    fields["data"] = tuple(fields["data"])
    fields["categories"] = tuple(fields["categories"]) if fields["categories"] else None
    return get_taskset(family).training_stream(TrainingRequest(**fields))


class TsbenchHarnessConfig(vf.HarnessConfig):
    id: str = MODULE
    play: str = "single-pass-text"
    """The tsbench harness that plays each row (single-pass-text, rlm, tools, ...)."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """tsbench harness settings (max_turns, max_tokens, cell_timeout_s, ...), typed as `tsbench eval` types them."""


class TsbenchHarness(vf.Harness[TsbenchHarnessConfig]):
    """tsbench's `play()`, in-process; every model call goes to the endpoint verifiers hands it."""

    EXECUTES_CODE = True  # rlm and tools run model code, in tsbench's own bubblewrap jail
    NEEDS_CONTAINER = False  # the jail is ours: no container needed around it

    def __init__(self, config: TsbenchHarnessConfig) -> None:
        super().__init__(config)
        harness = get_harness(config.play)  # an unknown harness, or one whose extra is missing, fails at load
        harness.prepare()
        # the harness's own settings: one it does not read (or [memory], not played here) is refused at load
        self.settings = harness_settings(harness, dict(config.settings), where="harness setting")
        require_jail(config.play, self.settings.unsafe_sandbox)  # one line when kernels cannot be jailed

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_: Any) -> ProgramResult:
        if data.key:
            sample = _stream_of(data.family, data.request).sample(*parse_key(data.key))
        else:
            sample = get_taskset(data.family).load(SampleRef(data.family, data.path, data.id))
        agent = OpenAIChatModel(ctx.model, base_url=endpoint, api_key=secret, name=ctx.model)
        try:
            outcome = await asyncio.to_thread(play, agent, self.config.play, sample.task, self.settings)
        finally:
            agent.close()
        result = outcome.result
        trace.info["tsbench"] = {
            "harness": self.config.play,
            "final_message": result.final_message if outcome.finished else None,
            "forced_final": bool(result.forced_final) if result is not None else None,
            "turns": result.turns if result is not None else 0,
            "generated_tokens": result.output_tokens if result is not None else 0,
            "error_type": outcome.error_type,
            "error": outcome.error,
        }
        return ProgramResult(exit_code=0, stdout="", stderr="")


class TsbenchEnvConfig(vf.EnvConfig):
    """One episode = one task's G attempts, their penalties set against each other (timerlm-anomalyxl §4.1)."""

    agent: vf.AgentConfig = vf.AgentConfig()
    group_size: int = Field(8, ge=1)
    """Attempts per task, G: the group kappa (the token cost) is relative to."""
    lambda_tok: float = Field(LAMBDA_TOK, ge=0)
    """Token-cost weight: -lambda_tok s kappa, only when s > 0."""
    lambda_fail: float = Field(LAMBDA_FAIL, ge=0)
    """Forced-final penalty: -lambda_fail when the episode was forced to its final turn (or ran out of budget)."""


class TsbenchEnv(vf.Env[TsbenchEnvConfig]):
    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        async with asyncio.TaskGroup() as tg:
            for _ in range(self.config.group_size):
                tg.create_task(agents.agent.run(task))

    async def finalize(self, task: vf.Task, episode: vf.Episode) -> None:
        """The penalised reward of every attempt, as train-grpo computes it (train/rewards.py)."""
        traces = list(episode.traces)
        played = [t.info.get("tsbench") or {} for t in traces]
        scores = [float(getattr(t.rewards.get("family_score"), "score", None) or 0.0) for t in traces]
        forced = [bool(p.get("forced_final")) or p.get("final_message") is None for p in played]
        tokens = [int(p.get("generated_tokens") or 0) for p in played]
        parts = penalised_rewards(
            scores, tokens, forced, lambda_tok=self.config.lambda_tok, lambda_fail=self.config.lambda_fail
        )
        for trace, part, score in zip(traces, parts, scores):
            trace.record_reward(
                "token_cost", -(score * part.kappa if score > 0 else 0.0), weight=self.config.lambda_tok
            )
            trace.record_reward("forced_final", -1.0 if part.fail_penalty else 0.0, weight=self.config.lambda_fail)
            trace.record_metric("kappa", part.kappa)


def environment_config(
    family: str = "anomalyxl",
    data: str | list[str] | None = None,
    split: str = "train",
    harness: str = "single-pass-text",
    *,
    seed: int = 42,
    categories: list[str] | None = None,
    limit: int | None = None,
    group_size: int = 1,
    lambda_tok: float = LAMBDA_TOK,
    lambda_fail: float = LAMBDA_FAIL,
    stream: dict[str, Any] | None = None,
    **settings: Any,
) -> vf.EnvConfig:
    """The EnvConfig of tsbench's environment over `family`, played by tsbench harness `harness`
    (`settings`: its settings, e.g. max_turns=4) on this machine (subprocess runtime); `stream`:
    {"steps": 300, "tasks_per_step": 16, ...} to play the family's training stream instead of a split."""
    data = [data] if isinstance(data, str) else list(data or [])
    taskset = dict(id=MODULE, family=family, data=data, split=split, seed=seed, categories=categories, limit=limit)
    if stream is not None:
        taskset.update(source="stream", **stream)
    return vf.resolve_env_config(
        {
            "taskset": taskset,
            "agent": {
                "harness": {"id": MODULE, "play": harness, "settings": settings},
                "runtime": {"type": "subprocess"},
            },
            "group_size": group_size,
            "lambda_tok": lambda_tok,
            "lambda_fail": lambda_fail,
        }
    )


load_environment = vf.load_environment  # verifiers' loader convention: the Env an EnvConfig names


__all__ = ["TsbenchEnv", "TsbenchHarness", "TsbenchTaskset", "environment_config", "load_environment"]
