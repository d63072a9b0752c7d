"""Periodic eval during GRPO: every `eval_every` steps the current policy plays held-out rows.

The rows are the first `eval_limit` of the family's `eval_split` (read beside `eval_data`, else the
training data), the same rows every time so the curve compares like with like. Each is played
through the training rollout path (`tsbench.harness.play` with a `PolicyAgent` on the training
backend, greedy) and scored by the family's scorer; a policy failure (a cap, no answer) scores 0,
an infrastructure failure is left out. The mean lands in the step's TRL log as `eval_mean_score`
(with `eval_forced_final_rate` and `eval_episodes`): metrics.parquet gets that column in the step's row,
and tensorboard and wandb show it as `eval/mean_score` (transformers maps `eval_*` to `eval/*`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from transformers import TrainerCallback

from tsbench.core.errors import UserError
from tsbench.harness import play
from tsbench.tasks import get_taskset
from tsbench.tasks.base import Sample, SampleRef, TaskFamily
from tsbench.train.batcher import Batcher
from tsbench.train.policy_agent import PolicyAgent
from tsbench.train.rewards import as_asked
from tsbench.train.rollouts import POLICY_FAILURES

EVAL_SEED = 7_919  # greedy decoding ignores it; a sampling backend gets the same seed every eval


def held_out_samples(family: TaskFamily, data: list[str], split: str, limit: int, categories: list[str] | None):
    """The first `limit` rows of `split` beside `data` (optionally only `categories`), loaded."""
    files = family.split_files(list(data), split)
    if not files:
        where = ", ".join(data) if data else "the family's default data"
        raise UserError(f"periodic eval: family {family.name} has no {split!r} split beside {where} (--eval-data)")
    rows = family.index(files, {})
    if "split" in rows.columns:
        rows = rows[rows["split"] == split]
    if categories:
        rows = rows[rows["category"].isin(categories)]
    if rows.empty:
        raise UserError(f"periodic eval: no {split!r} rows of family {family.name} to play")
    rows = rows.drop_duplicates("id").head(limit)
    return [family.load(SampleRef(family.name, str(p), str(i))) for i, p in zip(rows["id"], rows["path"])]


def periodic_eval(cfg: Any) -> list[TrainerCallback]:
    """The callbacks `eval_every` asks for ([] when off); reads the held-out rows now, before weights load."""
    return [PeriodicEval(cfg)] if cfg.eval_every > 0 else []


class PeriodicEval(TrainerCallback):
    """Plays the held-out rows at every `eval_every`-th step end; `attach` hands it the trainer and env."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        family = get_taskset(cfg.tasks.family)
        data = cfg.eval_data or cfg.tasks.data
        self.samples = held_out_samples(family, data, cfg.eval_split, cfg.eval_limit, cfg.tasks.categories)
        self.trainer: Any = None
        self.env: Any = None

    def attach(self, trainer: Any, env: Any) -> None:
        self.trainer, self.env = trainer, env

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if self.trainer is None or state.global_step % self.cfg.eval_every:
            return
        # TRL's GRPOTrainer averages `_metrics["train"]` into the step's log (GRPOTrainer.log), which runs
        # right after this hook: the numbers reach every tracker and RunLog's metrics.parquet row.
        metrics = self.trainer._metrics["train"]
        for key, value in self.evaluate().items():
            metrics[key].append(value)

    def evaluate(self) -> dict[str, float]:
        """Play every held-out row once with the current policy; the mean score and forced-final rate."""
        workers = max(1, min(self.cfg.rollout.rollout_workers, len(self.samples)))
        with self.env.backend(self.trainer) as (backend, wait_s):
            batcher = Batcher(backend, wait_s=wait_s, episodes=len(self.samples), workers=workers)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval") as pool:
                results = list(pool.map(lambda s: self.play(s, batcher), self.samples))
        if batcher.failure is not None:
            raise RuntimeError(f"the rollout backend failed during periodic eval: {batcher.failure}")
        scored = [r for r in results if r is not None]
        mean = lambda values: float(np.mean(values)) if values else float("nan")  # noqa: E731
        return {
            "eval_mean_score": mean([s for s, _ in scored]),
            "eval_forced_final_rate": mean([float(f) for _, f in scored]),
            "eval_episodes": float(len(scored)),
        }

    def play(self, sample: Sample, batcher: Batcher) -> tuple[float, bool] | None:
        """(score, forced final) of one greedy episode; None for a failure that is not the policy's."""
        cfg, env = self.cfg, self.env
        task = as_asked(env.taskset, cfg.rewards, sample.task)  # as in training
        hc = env.settings  # the harness's own, as training plays it
        agent = PolicyAgent(
            batcher,
            env.chat,
            max_new_tokens=hc.max_tokens or cfg.max_seq_len,
            max_seq_len=cfg.max_seq_len,
            temperature=0.0,
            seed=EVAL_SEED,
            name=cfg.policy.model,
            rendered=env.rendered,  # as-rendered: later turns as eval renders them, as in training
        )
        with batcher.episode():
            outcome = play(agent, env.harness, task, hc)
        if not outcome.finished:
            return (0.0, True) if outcome.error_type in POLICY_FAILURES else None
        message = env.scheme.scored_text(env.taskset, outcome.result.final_message)
        scored = env.score_fn(task.category, sample.gold, message)
        return float(scored.score), bool(outcome.result.forced_final)
