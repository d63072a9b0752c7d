"""The environment: TRL's `rollout_func` playing our harness episodes.

TRL hands this process's slice of the step's prompts, each task key repeated G times. Each key is
a task of the family's training stream (`TaskFamily.training_stream`); for every one an episode
runs through `tsbench.harness.play` with a `PolicyAgent` over the live policy; the family's
scorer scores its final message; the one record builder logs it to the run's journal.
What goes back to TRL: the first prompt's ids, the rest of the episode as "completion" ids (every
reply exactly as generated, plus the template glue and sandbox observations between replies),
an env mask (1 = the model generated it), the sampler's logprobs when vLLM reports them, and the
columns the reward functions read. A vision-language policy's episodes also hand back `vision` (the first
prompt's conversation and images, train/trainer.py puts them where TRL's loss forward reads them).

reasoning_history as-rendered (a template that drops earlier reasoning): each turn's prompt is the template's
render of the conversation, as eval renders it, so one episode is no longer one id sequence. TRL's contract is
one row per prompt it hands over (its rewards are sized len(prompts), trainer/grpo_trainer.py
`_calculate_rewards`), so TRL is asked for G x max_turns rows per task (grpo.trl_args): G episodes are played
and each hands back max_turns rows, one per turn (its rendered prompt, its reply as generated, logprobs),
padded with masked rows, every row carrying the episode's columns and so its reward and advantage.

Failures: an episode the policy ran into a wall (context full, a token or wall-clock cap) keeps
its tokens, scores 0 and counts as a forced final; a jail crash or an internal error is not the
policy's doing: its score is None (no reward, advantage 0) and its tokens leave the loss. An episode that
never generated (either kind: a prompt over max_seq_len too) keeps its score 0 in the journal and the step's
mean_score, but TRL gets no reward for it (rewards.rewarded_scores): advantage 0, outside its group's
mean and std. Groups
whose rewards are all equal carry no signal and leave the loss too (timerlm-anomalyxl §4.1); with
`refill_rounds` they are first played again on fresh tasks (DAPO's dynamic sampling), all rounds inside
one backend context. With a vLLM engine every episode hands TRL one sampler logprob per completion id
(`sampler_logprobs`); a backend that fails past its retries stops the step (agent.BackendError).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.harness import EpisodeOutcome, play
from tsbench.results import Journal, apply_outcome, apply_score, finish, new_record
from tsbench.tasks import get_taskset
from tsbench.tasks.base import Sample
from tsbench.train import rewards as rw
from tsbench.train import timemaster_reward as tm
from tsbench.train.backends import HFBackend, VLLMColocate, VLLMServer
from tsbench.train.batcher import Batcher
from tsbench.train.chat_tokens import ChatTokens
from tsbench.train.curriculum import parse_key, task_keys
from tsbench.train.policy_agent import PolicyAgent, Turn, assemble

POLICY_FAILURES = {"bad_request", "token_cap", "wall_clock"}  # the policy's own doing: score 0, forced final
ROLLOUTS = "rollouts"
RANKS = "ranks"  # rank-<i>.jsonl: the task keys each process played per step (multi-process checks)


@dataclass
class Row:
    """One training row TRL receives: a prompt, the ids after it, their env mask and sampler logprobs."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float] | None = None


@dataclass
class Episode:
    key: str
    index: int  # position in its group
    record: dict[str, Any]
    row: Row | None = None  # as-generated: the whole episode as one training row
    score: float | None = None  # None: an infrastructure failure, no reward
    forced_final: bool = False
    generated_tokens: int = 0  # T_i: all replies, observations excluded
    final_message: str = ""
    judge_score: float | None = None
    refill: int = 0  # 0: the step's own task; r > 0: a fresh task drawn in refill round r
    vision: Any = None  # a VLM's first prompt (models/local_vlm.Encoded): conversation, images, pixel inputs
    turns: list[Turn] = field(default_factory=list)  # as-rendered: every turn's prompt and reply, one row each
    prompt_tokens: int = 0  # the first prompt's
    clipped: bool = False  # the last reply stopped at its token cap


class Environment:
    """Callable as TRL's rollout_func(prompts, trainer) -> dict."""

    def __init__(
        self,
        cfg: Any,
        tokenizer: Any,
        run_dir: Path,
        *,
        model_name: str,
        processor: Any = None,
        history: str = "as-generated",
    ):
        self.cfg = cfg
        self.rendered = history == "as-rendered"
        self.rows_per_episode = cfg.harness_config.max_turns if self.rendered else 1  # TRL's rows per episode
        self.chat = ChatTokens(tokenizer, processor)
        self.processor = processor  # a VLM's: its episodes' images go to TRL's loss (train/trainer.py)
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.taskset = get_taskset(cfg.tasks.family)
        self.stream = self.taskset.training_stream(cfg.training_request())
        self.refill_streams: dict[int, Any] = {}  # refill round -> a stream of the same request, its own seed
        self.score_fn = self.taskset.scorer({"judge": None, "run_dir": str(run_dir)})
        self.scheme = cfg.rewards.scheme
        self.functions, self.weights = rw.reward_functions(cfg.rewards, self.taskset)
        self.reward_settings = rw.composite_settings(cfg.rewards)  # how the judge reads a reply
        self.harness, self.settings = cfg.episode_setup()  # the harness's own settings, checked once; memory's wrapper
        self.judge = None
        if self.scheme.judged and cfg.rewards.soft > 0:
            from tsbench.models.registry import get_model

            self.judge = get_model(cfg.rewards.judge, base_url=cfg.rewards.judge_base_url)
        self.journal_dir = run_dir / ROLLOUTS
        self.ranks_dir = run_dir / RANKS
        self.server: VLLMServer | None = None
        self.last: dict[str, float] = {}  # the latest step's numbers, for metrics.parquet

    def keys(self) -> list[str]:
        """Every task key of the run, in the order TRL reads them."""
        return task_keys(self.cfg.max_steps, self.cfg.tasks_per_step)

    def sample(self, key: str, refill: int = 0) -> Sample:
        """The training task a key names (or, in refill round r, its stand-in: the same (step, j) of a stream
        with its own seed, so a fresh task of the same curriculum phase, distinct on every process and
        drawn again on resume), its question as the reward asks it (`RewardScheme.question`: the composite
        reward's answer format, rewards.composite_question)."""
        stream = self.stream
        if refill:
            if refill not in self.refill_streams:
                request = dataclasses.replace(self.cfg.training_request(), seed=seed31(self.cfg.seed, "refill", refill))
                self.refill_streams[refill] = self.taskset.training_stream(request)
            stream = self.refill_streams[refill]
        sample = stream.sample(*parse_key(key))
        return dataclasses.replace(sample, task=rw.as_asked(self.taskset, self.cfg.rewards, sample.task))

    # -- the rollout function ------------------------------------------------------------------
    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list]:
        from accelerate.utils import gather_object

        handed = prompts
        prompts = prompts[:: self.rows_per_episode]  # every key G times: one entry per episode
        step = parse_key(prompts[0])[0]
        started = time.perf_counter()
        group = self.cfg.group_size
        discarded: list[Episode] = []  # refilled groups' first tries: journaled, not trained on
        with self.backend(trainer) as (backend, wait_s):  # one context for every round (ZeRO-3 gathers once)
            episodes, batches = self.rollout(
                [(key, prompts[:i].count(key), 0) for i, key in enumerate(prompts)], backend, wait_s
            )
            totals, dropped = self.signal(episodes, prompts)
            for round_ in range(1, self.cfg.refill_rounds + 1):  # DAPO's dynamic sampling, when asked for
                starts = [i for i in range(0, len(prompts), group) if dropped[i]]
                if not starts:
                    break
                fresh, more = self.rollout(
                    [(prompts[i], k, round_) for i in starts for k in range(group)], backend, wait_s
                )
                batches += more
                for n, i in enumerate(starts):
                    discarded += episodes[i : i + group]
                    episodes[i : i + group] = fresh[n * group : (n + 1) * group]
                totals, dropped = self.signal(episodes, prompts)
        rows = [self.rows(e) for e in episodes]
        flat, owner = ordered_rows(rows, self.cfg.group_size)
        logprobs, masks = sampler_logprobs(flat, wanted=self.cfg.rollout.engine != "hf")
        for row, mask in zip(flat, masks):
            row.env_mask = mask
        columns = {k: [values[i] for i in owner] for k, values in self.columns(episodes).items()}
        for episode, of_episode, total, drop in zip(episodes, rows, totals, dropped):
            if total is None or drop:
                for row in of_episode:
                    row.env_mask = [0] * len(row.env_mask)
            episode.record["metrics"].update(
                step=float(step), dropped=float(drop), **({} if total is None else {"reward": float(total)})
            )
        for episode in discarded:
            episode.record["metrics"].update(step=float(step), dropped=1.0, refilled=1.0)
        records = gather_object([e.record for e in discarded + episodes])
        stats = gather_object(
            [
                (
                    e.score,
                    t,
                    d,
                    e.forced_final,
                    e.generated_tokens,
                    e.record["turns"],
                    e.refill > 0,
                    e.prompt_tokens,
                    e.clipped,
                )
                for e, t, d in zip(episodes, totals, dropped)
            ]
        )
        self.log_rank(trainer.accelerator.process_index, step, prompts, episodes)
        if trainer.accelerator.is_main_process:
            self.log(records)
            self.last = self.summary(step, stats, batches, time.perf_counter() - started)
        if len(flat) != len(handed):
            raise RuntimeError(f"{len(flat)} training rows for the {len(handed)} prompts TRL handed over")
        return {
            "prompt_ids": [r.prompt_ids for r in flat],
            "completion_ids": [r.completion_ids for r in flat],
            "logprobs": logprobs,
            "env_mask": [r.env_mask for r in flat],
            **({"vision": [episodes[i].vision for i in owner]} if any(e.vision is not None for e in episodes) else {}),
            **columns,
        }

    def log_rank(self, rank: int, step: int, prompts: list[str], episodes: list[Episode]) -> None:
        """One line per step per process: the keys TRL handed it and the tasks its groups played."""
        self.ranks_dir.mkdir(parents=True, exist_ok=True)
        from tsbench.train.launch import group_timeout_s

        line = {"step": step, "rank": rank, "keys": prompts, "samples": [e.record["id"] for e in episodes]}
        line["group_timeout_s"] = group_timeout_s()  # the live process group's: what its watchdog waits
        with open(self.ranks_dir / f"rank-{rank}.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")

    def rollout(self, jobs: list[tuple[str, int, int]], backend: Any, wait_s: float | None) -> tuple[list, int]:
        """Play (key, index in group, refill round) jobs on the shared backend; the episodes and batch count."""
        workers = min(self.cfg.rollout.rollout_workers, len(jobs))
        batcher = Batcher(backend, wait_s=wait_s, episodes=len(jobs), workers=workers)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout") as pool:
            episodes = list(pool.map(lambda job: self.play(job[0], job[1], batcher, refill=job[2]), jobs))
        if batcher.failure is not None:  # the generator itself failed: no step trains on a batch of failures
            raise RuntimeError(f"the rollout backend failed: {batcher.failure}") from batcher.failure
        return episodes, batcher.batches

    def signal(self, episodes: list[Episode], keys: list[str]) -> tuple[list[float | None], list[bool]]:
        """What TRL will sum per rollout, and which groups carry no signal."""
        totals = rw.weighted_total(self.functions, self.weights, keys, self.columns(episodes))
        return totals, rw.zero_variance(totals, keys)

    @contextlib.contextmanager
    def backend(self, trainer: Any) -> Iterator[tuple[Any, float | None]]:
        engine = self.cfg.rollout.engine
        if engine == "vllm-colocate":
            yield VLLMColocate(trainer.vllm_generation.llm), 0.05
        elif engine == "vllm-server":
            if self.server is None:
                self.server = VLLMServer(self.cfg.rollout.vllm_server_url)
            yield self.server, 0.05
        else:  # the training model itself, gathered once for the whole rollout phase (ZeRO-3)
            from trl.models.utils import unwrap_model_for_generation

            with unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as model:
                yield HFBackend(model, self.tokenizer), None

    # -- one episode ---------------------------------------------------------------------------
    def play(self, key: str, index: int, batcher: Batcher, refill: int = 0) -> Episode:
        sample = self.sample(key, refill)
        hc = self.settings
        record = new_record(
            sample_id=sample.ref.id,
            epoch=index,
            family=self.taskset.name,
            columns={"category": sample.task.category, **sample.columns},
            model=self.model_name,
            harness=self.cfg.harness,
            depth=self.settings.recursion_depth,
            gold=sample.gold,
        )
        agent = PolicyAgent(
            batcher,
            self.chat,
            max_new_tokens=hc.max_tokens or self.cfg.max_seq_len,
            max_seq_len=self.cfg.max_seq_len,
            temperature=self.cfg.temperature,
            seed=seed31(self.cfg.seed, "rollout", key if not refill else f"{key}/refill-{refill}", index),
            name=self.model_name,
            rendered=self.rendered,
        )
        started = time.perf_counter()
        with batcher.episode():
            outcome = play(agent, self.harness, sample.task, self.settings)
        apply_outcome(record, outcome)
        episode = Episode(key, index, record, refill=refill, vision=agent.vision)
        if self.rendered:
            episode.turns = list(agent.turns)
        else:
            episode.row = self.sequence(agent)
        episode.generated_tokens = sum(len(t.output_ids) for t in agent.turns)
        episode.prompt_tokens = len(agent.turns[0].prompt_ids) if agent.turns else 0
        episode.clipped = bool(agent.turns) and agent.turns[-1].clipped(self.chat.eos_ids)
        self.score(episode, outcome, sample.task.category, sample.gold)
        finish(record, time.perf_counter() - started)
        return episode

    def sequence(self, agent: PolicyAgent) -> Row:
        prompt, completion, mask, logprobs = assemble(agent.turns)
        if not completion:  # nothing generated (the episode failed first): one masked end token
            end = self.tokenizer.eos_token_id
            prompt, completion, mask = prompt or [end], [end], [0]
            logprobs = [0.0] if logprobs is not None else None
        return Row(prompt, completion, mask, logprobs)

    def rows(self, episode: Episode) -> list[Row]:
        """The episode's training rows: its one sequence, or (as-rendered) one row per turn, each turn's
        rendered prompt and its reply as generated, padded to `rows_per_episode` with masked end tokens."""
        if not self.rendered:
            return [episode.row]
        if len(episode.turns) > self.rows_per_episode:
            raise RuntimeError(
                f"an episode made {len(episode.turns)} model calls; max_turns is {self.rows_per_episode}"
            )
        rows = [Row(list(t.prompt_ids), list(t.output_ids), [1] * len(t.output_ids), t.logprobs) for t in episode.turns]
        rows = [r for r in rows if r.completion_ids]  # an empty reply has no token to train
        end = self.tokenizer.eos_token_id
        while len(rows) < self.rows_per_episode:  # a turn never played: two end tokens, masked, run 2 wide (trainer.py)
            rows.append(Row([end], [end], [0], None))
        return rows

    def score(self, episode: Episode, outcome: EpisodeOutcome, category: str, gold: Any) -> None:
        record = episode.record
        if outcome.finished:
            message = outcome.result.final_message
            episode.final_message, episode.forced_final = message, outcome.result.forced_final
            # composite: the family scores the <class> span (or, reading the tags itself, the whole reply)
            scored = self.score_fn(category, gold, self.scheme.scored_text(self.taskset, message))
            apply_score(
                record,
                score=scored.score,
                valid=scored.valid,
                parsed=scored.parsed,
                answer_error=scored.error,
                metrics=scored.metrics,
            )
            episode.score = float(scored.score)
            if self.judge is not None:
                reading = rw.read_reply(self.taskset, category, gold, message, self.reward_settings)
                hard = tm.hard_reward(reading, self.taskset.gold_class(category, gold))
                if tm.wants_judge(reading, hard):  # the soft reward needs the class and an extension
                    episode.judge_score = self.ask_judge(reading.tagged, category)
                    record["metrics"]["judge"] = episode.judge_score
        elif outcome.error_type in POLICY_FAILURES:
            episode.score, episode.forced_final = 0.0, True  # the budget ran out before an answer
        record["metrics"].update(
            train_score=episode.score if episode.score is not None else float("nan"),
            generated_tokens=float(episode.generated_tokens),
        )

    def ask_judge(self, tagged: rw.Tagged, category: str) -> float:
        """The soft reward's judge as TimeMaster's public code asks it (train/timemaster_judge.py: one float,
        temperature 1.0, generic advice capped at 0.4); 0 when it cannot be reached or gives no usable float."""
        from tsbench.train.timemaster_judge import soft_score

        return soft_score(self.judge, tagged, category, self.reward_settings)

    # -- what goes back, what is kept ----------------------------------------------------------
    @staticmethod
    def columns(episodes: list[Episode]) -> dict[str, list]:
        return {
            "score": rw.rewarded_scores([e.score for e in episodes], [e.generated_tokens for e in episodes]),
            "forced_final": [e.forced_final for e in episodes],
            "generated_tokens": [e.generated_tokens for e in episodes],
            "final_message": [e.final_message for e in episodes],
            "category": [e.record["category"] for e in episodes],
            "gold": [e.record["gold"] for e in episodes],
            "judge_score": [e.judge_score for e in episodes],
        }

    def log(self, records: list[dict]) -> None:
        if not self.cfg.log_rollouts:
            return
        journal = Journal(self.journal_dir)
        try:
            for record in records:
                record["metrics"] = {k: v for k, v in record["metrics"].items() if v is not None and v == v}
                journal.append(record)
        finally:
            journal.close()

    def summary(self, step: int, stats: list[tuple], batches: int, seconds: float) -> dict[str, float]:
        scored = [s for s in stats if s[0] is not None]
        groups = len(stats) // self.cfg.group_size

        def mean(values: list) -> float:
            return float(np.mean(values)) if values else float("nan")

        return {
            "mean_score": mean([s[0] for s in scored]),
            "mean_reward": mean([s[1] for s in scored if s[1] is not None]),
            "forced_final_rate": mean([float(s[3]) for s in scored]),
            "mean_generated_tokens": mean([s[4] for s in scored]),
            "mean_turns": mean([s[5] for s in scored]),
            # per episode (TRL's completions/* count training rows, so turns under as-rendered)
            "episode/mean_generated_tokens": mean([s[4] for s in stats]),
            "episode/min_generated_tokens": float(min((s[4] for s in stats), default=0)),
            "episode/max_generated_tokens": float(max((s[4] for s in stats), default=0)),
            "episode/clipped_ratio": mean([float(s[8]) for s in stats]),
            "episode/mean_prompt_tokens": mean([s[7] for s in stats]),
            "episode/mean_turns": mean([s[5] for s in stats]),
            "tokens/generated": float(sum(s[4] for s in stats)),
            "infra_failures": float(len(stats) - len(scored)),
            "dropped_groups": float(sum(s[2] for s in stats) // self.cfg.group_size),
            "refilled_groups": float(sum(s[6] for s in stats) // self.cfg.group_size),
            "groups": float(groups),
            "generation_batches": float(batches),
            "rollout_s": seconds,
            **self.stream.step_metrics(step),
        }


def ordered_rows(rows: list[list[Row]], group: int) -> tuple[list[Row], list[int]]:
    """Every episode's rows in episode order (TRL's group: the G x rows rows of one task key, contiguous),
    and the episode each row belongs to. Each forward chunk runs at its own rows' width (train/trainer.py)."""
    flat = [row for of_episode in rows for row in of_episode]
    owner = [i for i, of_episode in enumerate(rows) for _ in of_episode]
    return flat, owner


def sampler_logprobs(rows: list[Row], *, wanted: bool) -> tuple[list[list[float]] | None, list[list[int]]]:
    """TRL's `logprobs` and the env masks that go with them.

    None only when no logprobs are wanted (the hf engine: TRL applies no vLLM correction). With a
    vLLM engine TRL builds one tensor from every row, so every row gets one float per completion
    id: a row without them (it never generated: a jail that did not start, a prompt over
    max_seq_len; or a reply came back without logprobs) gets 0.0 per id and an all-zero mask, so it
    adds no token to the loss and no weight to the correction."""
    masks = [list(r.env_mask) for r in rows]
    if not wanted:
        return None, masks
    out = []
    for row, mask in zip(rows, masks):
        if row.logprobs is not None and len(row.logprobs) == len(row.completion_ids):
            out.append(list(row.logprobs))
        else:
            out.append([0.0] * len(row.completion_ids))
            mask[:] = [0] * len(mask)
    return out, masks


def seed31(*parts: object) -> int:
    """A 31-bit seed from blake2b over the parts: refill rounds' task seeds, each rollout's sampling seed."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") >> 1) % 2**31
