"""Any task family as a `verifiers` environment, for trainers built on it (prime-rl, vf-eval).

    import tsbench.interop.verifiers_env as tv
    env = tv.load_environment(family="anomalyxl", data="data/anomalyxl/seed42", split="train", harness="rlm")
    vf-eval tsbench-verifiers --env.taskset.family anomalyxl --env.taskset.data data/anomalyxl/seed42
        --env.agent.runtime.type subprocess --env.agent.harness.play rlm ...

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
import json
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.runtimes import ProgramResult

from tsbench.core.config import build
from tsbench.eval.selection import select_rows
from tsbench.harness import HarnessConfig, get_harness, play, require_jail
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.tasks import get_taskset
from tsbench.tasks.base import SampleRef

MODULE = "tsbench-verifiers"  # the plugin id: verifiers imports it as the package tsbench_verifiers


class TsbenchTaskData(vf.TaskData):
    """One family row: where it lives (the harness loads its series when it plays it) and its gold."""

    family: str
    path: str
    category: str
    gold: str  # JSON, as the results store it


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
        scored = get_taskset(task.family).score(task.category, json.loads(task.gold), played["final_message"])
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
    """Rows per stratum (AnomalyXL: per category), a seeded draw exactly as `tsbench eval --limit-per-category` makes it."""


class TsbenchTaskset(vf.Taskset[TsbenchTask, TsbenchTasksetConfig]):
    """The family's rows of one split, as `tsbench eval` selects them."""

    def load(self):
        c = self.config
        family = get_taskset(c.family)
        files = family.resolve(list(c.data), seed=c.seed, split=c.split, root=None, filters={})
        rows = select_rows(
            family, files, categories=c.categories, sample_ids=None, limit_per_category=c.limit, seed=c.seed
        )
        for row in rows.to_dict("records"):
            gold = row["gold"] if isinstance(row["gold"], str) else json.dumps(row["gold"], sort_keys=True, default=str)
            data = TsbenchTaskData(
                id=str(row["id"]),
                prompt=str(row.get("question") or row["id"]),
                family=c.family,
                path=str(row["path"]),
                category=str(row["category"]),
                gold=gold,
            )
            yield TsbenchTask(data, c.task)


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
        self.settings = harness.settings(build(HarnessConfig, dict(config.settings), where="harness setting"))
        require_jail(config.play, self.settings.unsafe_sandbox)  # one line when kernels cannot be jailed

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_: Any) -> ProgramResult:
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
            "error_type": outcome.error_type,
            "error": outcome.error,
        }
        return ProgramResult(exit_code=0, stdout="", stderr="")


def load_environment(
    family: str = "anomalyxl",
    data: str | list[str] | None = None,
    split: str = "train",
    harness: str = "single-pass-text",
    *,
    seed: int = 42,
    categories: list[str] | None = None,
    limit: int | None = None,
    **settings: Any,
) -> vf.Env:
    """A verifiers environment over one split of `family`, played by tsbench harness `harness`
    (`settings`: its settings, e.g. max_turns=4). The harness runs on this machine (subprocess runtime)."""
    data = [data] if isinstance(data, str) else list(data or [])
    taskset = dict(id=MODULE, family=family, data=data, split=split, seed=seed, categories=categories, limit=limit)
    config = vf.SingleAgentEnvConfig(
        taskset=taskset,
        agent={"harness": {"id": MODULE, "play": harness, "settings": settings}, "runtime": {"type": "subprocess"}},
    )
    return vf.load_environment(config)


__all__ = ["TsbenchHarness", "TsbenchTaskset", "load_environment"]
