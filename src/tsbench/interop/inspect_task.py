"""AnomalyXL as an inspect_ai task: `inspect eval tsbench/anomalyxl --model openai/gpt-4.1-mini`.

The dataset is a generated split (`tsbench generate` first), the solver plays one of our
harnesses with inspect's model (single-pass-text by default; `-T harness=rlm` runs the recursive
harness with its jailed kernel), the scorer is the family's own. A failed episode (a cap, a
sandbox failure) is an inspect sample error, never a 0, as in our runs.

    inspect eval tsbench/anomalyxl --model openai/gpt-4.1-mini -T limit=2 -T harness=rlm
    inspect eval tsbench/anomalyxl --model mockllm/model -T data=data/small/seed42
"""

from __future__ import annotations

import json
from dataclasses import asdict

import anyio.to_thread
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import Score, Target, grouped, mean, scorer, stderr
from inspect_ai.solver import Generate, TaskState, solver

from tsbench.eval.selection import select_rows
from tsbench.harness import HarnessSettings, get_harness, harness_settings, play
from tsbench.harness.rlm import RLMSettings
from tsbench.interop.inspect_messages import to_messages
from tsbench.interop.inspect_model import InspectChatModel
from tsbench.interop.public_gold import public_gold
from tsbench.tasks import get_taskset
from tsbench.tasks.base import SampleRef


def _list(value) -> list[str] | None:
    if value is None or value == "":
        return None
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(v).strip() for v in items if str(v).strip()]


def tsbench_dataset(
    family: str,
    *,
    data=None,
    seed: int = 42,
    split: str = "test",
    regime: str = "both",
    categories=None,
    sample_ids=None,
    limit: int | None = None,
) -> MemoryDataset:
    """The rows `tsbench eval` would select with the same flags, as inspect samples (no series values:
    the solver loads a sample's series when it plays it)."""
    taskset = get_taskset(family)
    filters = {"regime": regime}
    files = taskset.resolve(_list(data) or [], seed=seed, split=split, root=None, filters=filters)
    rows = select_rows(
        taskset,
        files,
        categories=_list(categories),
        sample_ids=_list(sample_ids),
        limit=limit,
        seed=seed,
        filters=filters,
    )
    samples = []
    for row in rows.to_dict("records"):
        gold = row["gold"] if isinstance(row["gold"], str) else json.dumps(row["gold"], sort_keys=True, default=str)
        meta = {k: row[k] for k in ("category", "regime", "length") if k in row}
        samples.append(
            Sample(
                id=row["id"],
                input=str(row.get("question") or row["id"]),
                target=public_gold(gold),  # what inspect shows; the scorer reads metadata's full gold
                metadata={**meta, "ref": {"family": family, "path": str(row["path"]), "id": row["id"]}, "gold": gold},
            )
        )
    return MemoryDataset(samples, name=f"tsbench/{family}", location=str(files[0].parent))


@solver
def tsbench_harness(harness: str = "single-pass-text", **settings):
    """Play the sample with one of our harnesses (harness/): inspect's model is the agent."""
    episode = get_harness(harness)  # an unknown name, or a harness whose extra is missing, fails before any sample
    episode.prepare()
    # typed and range-checked as eval's flags are; a setting the harness does not read is refused
    cfg = harness_settings(episode, settings, where="-T setting")

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        ref = SampleRef(**state.metadata["ref"])
        sample = get_taskset(ref.family).load(ref)
        agent = InspectChatModel(get_model())
        outcome = await anyio.to_thread.run_sync(play, agent, harness, sample.task, cfg)
        result = outcome.result
        if result is not None:
            state.messages = to_messages(result.transcript, agent.name)
            state.output = ModelOutput.from_content(agent.name, result.final_message)
            state.metadata["tsbench"] = {
                k: v for k, v in asdict(result).items() if k not in ("transcript", "token_trace", "final_message")
            }
        if outcome.error_type is not None:
            raise RuntimeError(f"{outcome.error_type}: {outcome.error}")
        return state

    return solve


@scorer(metrics=[mean(), stderr(), grouped(mean(), "category", all=False)])
def tsbench_score():
    """The family's own scorer on the final message: score in [0, 1], the parsed answer, secondary metrics."""

    async def score(state: TaskState, target: Target) -> Score:
        ref = state.metadata["ref"]
        gold = json.loads(state.metadata.get("gold") or target.text)
        scored = get_taskset(ref["family"]).score(state.metadata["category"], gold, state.output.completion)
        return Score(
            value=scored.score,
            answer=None if scored.parsed is None else json.dumps(scored.parsed, default=str),
            explanation=scored.error,
            metadata={"valid": scored.valid, **scored.metrics},
        )

    return score


_HC = HarnessSettings()  # the task's defaults are the harness's own


@task
def anomalyxl(
    data: str | None = None,
    seed: int = 42,
    split: str = "test",
    regime: str = "both",
    categories: str | None = None,
    sample_ids: str | None = None,
    limit: int | None = None,
    harness: str = "single-pass-text",
    max_turns: int = _HC.max_turns,
    depth: int = RLMSettings().depth,
    max_tokens: int | None = None,
    text_budget_chars: int = _HC.text_budget_chars,
    cell_timeout_s: float = _HC.cell_timeout_s,
    unsafe_sandbox: bool = False,
) -> Task:
    """AnomalyXL (data: a seed dir or files [data/anomalyxl/seed<seed>]; limit: rows in all, as eval --limit)."""
    settings = dict(
        max_turns=max_turns,
        depth=depth,
        max_tokens=max_tokens,
        text_budget_chars=text_budget_chars,
        cell_timeout_s=cell_timeout_s,
        unsafe_sandbox=unsafe_sandbox,
    )
    return Task(
        dataset=tsbench_dataset(
            "anomalyxl",
            data=data,
            seed=seed,
            split=split,
            regime=regime,
            categories=categories,
            sample_ids=sample_ids,
            limit=limit,
        ),
        solver=tsbench_harness(harness, **settings),
        scorer=tsbench_score(),
        metadata={"family": "anomalyxl", "harness": harness},
    )
