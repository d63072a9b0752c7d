"""Supervised examples for `tsbench sft-baseline`: token ids plus a label mask, built turn by turn.

Two sources:

- single-pass-text: a row of any task family (read through its `index` and `load`) becomes the exact
  prompt the single-pass-text harness sends (`SINGLE_PASS_SYSTEM` + `single_pass_text_prompt`),
  followed by the family's `sft_target` (the gold as an answer) as the reply; a row whose target its
  own scorer does not give full marks is skipped, so a family's default target is checked, not trusted.
- rlm-trajectories: a finished, well-scored RLM episode from any eval run becomes the conversation the
  policy saw (system, question, its code replies, the sandbox observations as user messages).

Only the policy's own replies are trained: every system, user and observation token gets the label
IGNORE. Token ids come from the tokenizer's chat template, rendered one message longer at a time, so
the prompt part of every example is token for token what `LocalHFModel.generate` feeds the model.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.episode import EpisodeTask
from tsbench.core.errors import UserError
from tsbench.core.provenance import read_json, sha256_file
from tsbench.harness.prompts import SINGLE_PASS_SYSTEM, single_pass_text_prompt
from tsbench.models.base import Message
from tsbench.results.records import transcript_events
from tsbench.tasks.base import Sample, SampleRef, TaskFamily

IGNORE = -100  # the label transformers' causal-LM loss skips


@dataclass
class Example:
    """One training or validation sequence; `labels[i]` is IGNORE or `input_ids[i]`."""

    input_ids: np.ndarray  # int64, (T,)
    labels: np.ndarray  # int64, (T,)
    row_id: str
    category: str
    regime: str
    split: str
    gold: dict  # the scorer's gold (private keys included)
    # What the model sees before its final reply; kept for validation examples only (generation).
    prompt: list[Message] | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def n_trained(self) -> int:
        return int((self.labels != IGNORE).sum())


@dataclass
class DataStats:
    """What went in and what was left out, for the run manifest."""

    examples: int = 0
    tokens: int = 0
    trained_tokens: int = 0
    max_tokens: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count
    categories: Counter = field(default_factory=Counter)

    def add(self, example: Example) -> None:
        self.examples += 1
        self.tokens += example.n_tokens
        self.trained_tokens += example.n_trained
        self.max_tokens = max(self.max_tokens, example.n_tokens)
        self.categories[example.category] += 1

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "skipped": dict(self.skipped), "categories": dict(self.categories)}


# -- token ids and masks from the chat template ---------------------------------------------------


class TemplateError(UserError):
    """The chat template cannot be rendered incrementally, so prompt and reply tokens can't be told apart."""


def _render(tokenizer, messages: list[dict], *, generation_prompt: bool) -> list[int]:
    if not messages:
        return []
    encoded = tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=generation_prompt, return_dict=True
    )
    return list(encoded["input_ids"])


def encode_conversation(tokenizer, messages: list[dict], eos_ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and labels for a chat; only assistant replies (through their end-of-turn token) are trained.

    The conversation is rendered with one more message each step. Each step must extend the previous
    rendering; the tokens it adds belong to the new message. For an assistant message the rendering
    with the generation prompt marks where the reply starts (the role header stays masked, as it is
    part of the prompt at generation time) and the first end-of-turn token after it is where the
    model stops; template text after that token (a newline) is masked.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise TemplateError("the tokenizer has no chat template; SFT formats conversations with it")
    eos = set(eos_ids)
    ids: list[int] = []
    labels: list[int] = []

    def extend(rendered: list[int], train: bool, what: str) -> None:
        if rendered[: len(ids)] != ids:
            raise TemplateError(
                f"the chat template re-renders earlier turns when {what} is added, so turn-by-turn "
                "masking is impossible; use a model whose template renders conversations incrementally"
            )
        new = rendered[len(ids) :]
        ids.extend(new)
        labels.extend(new if train else [IGNORE] * len(new))

    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            extend(
                _render(tokenizer, messages[: i + 1], generation_prompt=False), False, f"a {message['role']} message"
            )
            continue
        extend(_render(tokenizer, messages[:i], generation_prompt=True), False, "the generation prompt")
        full = _render(tokenizer, messages[: i + 1], generation_prompt=False)
        if full[: len(ids)] != ids:
            raise TemplateError(
                "the chat template renders an assistant reply differently from its generation prompt; "
                "turn-by-turn masking is impossible with this model"
            )
        reply = full[len(ids) :]
        stop = next((j + 1 for j, token in enumerate(reply) if token in eos), len(reply))
        ids.extend(reply)
        labels.extend(reply[:stop] + [IGNORE] * (len(reply) - stop))
    return np.asarray(ids, dtype=np.int64), np.asarray(labels, dtype=np.int64)


def prompt_ids(tokenizer, messages: list[Message]) -> list[int]:
    """The ids a generation call starts from: the chat up to and including the assistant header."""
    return _render(tokenizer, [{"role": m.role, "content": m.content} for m in messages], generation_prompt=True)


# -- single-pass-text from the dataset ------------------------------------------------------------


def split_files(family: TaskFamily, data_dir: str | Path) -> dict[str, list[Path]]:
    """{"train": [...], "val": [...]} files of the family beside `data_dir` (val may be empty); no
    train split is a one-line error that names the fix."""
    data_dir = Path(data_dir)
    files = {split: family.split_files([str(data_dir)], split) for split in ("train", "val")}
    if not files["train"]:
        seed = data_dir.name.removeprefix("seed") if data_dir.name.startswith("seed") else "42"
        raise UserError(
            f"no {family.name} train split in {data_dir} (create the train and val splits with: "
            f"tsbench generate --seed {seed} --split all --family {family.name})"
        )
    return files


def file_fingerprint(path: Path) -> str:
    """A dataset file's sha256: from the dataset's manifest.json when recorded there, else computed."""
    manifest = path.parent / "manifest.json"
    if manifest.is_file():
        for split in read_json(manifest).get("splits", {}).values():
            recorded = split.get("files", {}).get(path.name, {}).get("sha256")
            if recorded:
                return recorded
    return sha256_file(path)


def rows_of(family: TaskFamily, files: list[Path], regime: str | None = None) -> pd.DataFrame:
    """The family's index of `files`, only the rows of one regime when given."""
    index = family.index([Path(f) for f in files], {})
    if regime is not None and "regime" in index.columns:
        index = index[index["regime"] == regime]
    return index.drop_duplicates("id").reset_index(drop=True)


def balanced_refs(
    family: TaskFamily, files: list[Path], limit: int | None, regime: str | None = None, exclude: set[str] = frozenset()
) -> list[SampleRef]:
    """The rows of `files` (of one regime when given), or `limit` of them taken round-robin over
    categories (each in index order); returned in index order."""
    index = rows_of(family, files, regime)
    index = index[~index["id"].isin(exclude)].reset_index(drop=True)
    chosen = list(range(len(index)))
    if limit is not None and limit < len(index):
        queues = [list(group.index) for _, group in index.groupby("category", sort=False)]
        chosen = []
        while len(chosen) < limit:
            for queue in queues:
                if queue and len(chosen) < limit:
                    chosen.append(queue.pop(0))
        chosen.sort()
    return [SampleRef(family.name, str(index.at[i, "path"]), str(index.at[i, "id"])) for i in chosen]


def train_val_refs(
    family: TaskFamily, data_dir: str | Path, train_rows: int | None, val_rows: int, regime: str | None, seed: int
) -> tuple[list[SampleRef], list[SampleRef], str]:
    """(train, val, where val came from): the val split's rows, or, for a family without one (TimerBed),
    a seeded tenth of train (at most `val_rows`) held out of the training rows."""
    files = split_files(family, data_dir)
    train = balanced_refs(family, files["train"], train_rows, regime)
    val = balanced_refs(family, files["val"], val_rows, regime) if files["val"] and val_rows else []
    if val or not val_rows:
        return train, val, "val"
    everything = balanced_refs(family, files["train"], None, regime)
    order = np.random.default_rng(seed).permutation(len(everything))
    held = {everything[i].id for i in order[: min(val_rows, max(1, len(everything) // 10))]}
    train = balanced_refs(family, files["train"], train_rows, regime, exclude=held)
    return train, [r for r in everything if r.id in held], "train"


def single_pass_messages(task: EpisodeTask, text_budget_chars: int) -> list[Message]:
    """The single-pass-text harness's messages for this task (see harness/single_pass.py)."""
    text, _ = single_pass_text_prompt(task.question, task.channel_names, task.values, text_budget_chars)
    return [Message("system", SINGLE_PASS_SYSTEM), Message("user", text)]


def single_pass_example(
    tokenizer,
    family: TaskFamily,
    sample: Sample,
    text_budget_chars: int,
    eos_ids: Iterable[int],
    *,
    keep_prompt: bool = False,
) -> Example:
    task = sample.task
    prompt = single_pass_messages(task, text_budget_chars)
    chat = [{"role": m.role, "content": m.content} for m in prompt]
    chat.append({"role": "assistant", "content": family.sft_target(task.category, sample.gold)})
    ids, labels = encode_conversation(tokenizer, chat, eos_ids)
    return Example(
        ids,
        labels,
        task.row_id,
        task.category,
        task.regime,
        str(sample.columns.get("split") or ""),
        sample.gold,
        prompt if keep_prompt else None,
    )


def target_problem(family: TaskFamily, sample: Sample) -> str | None:
    """Why a row cannot be a single-pass example (None: it can): no series, or a target its scorer rejects."""
    if sample.task.values is None:
        return "no_series"
    scored = family.score(sample.task.category, sample.gold, family.sft_target(sample.task.category, sample.gold))
    return None if scored.valid and scored.score >= 1.0 else "target_does_not_score"


def fit_text_budget(tokenizer, tasks: list[EpisodeTask], max_seq_len: int, reserve_tokens: int) -> int:
    """The largest serialized-values budget (characters) whose prompts, plus `reserve_tokens`, fit `max_seq_len`.

    Starts from a generous guess and scales it by the measured characters per token until every
    sample task fits (the serializer keeps every k-th sample, so text length moves in steps).
    """

    def prompt_len(task: EpisodeTask, budget: int) -> int:
        return len(prompt_ids(tokenizer, single_pass_messages(task, budget)))

    available = max_seq_len - reserve_tokens
    budget = 4 * max_seq_len
    for _ in range(12):
        worst_task = max(tasks, key=lambda t: prompt_len(t, budget))
        worst = prompt_len(worst_task, budget)
        if worst <= available:
            return budget
        overhead = prompt_len(worst_task, 1)  # question, note and about one value per channel
        if overhead >= available:
            raise UserError(
                f"the question alone takes {overhead} tokens; it cannot fit max_seq_len={max_seq_len} "
                f"with {reserve_tokens} tokens for the answer"
            )
        budget = max(1, int(budget * (available - overhead) / max(1, worst - overhead) * 0.97))
    raise UserError(f"could not fit single-pass prompts into max_seq_len={max_seq_len}; pass text_budget_chars")


def single_pass_examples(
    tokenizer,
    family: TaskFamily,
    refs: list[SampleRef],
    *,
    text_budget_chars: int,
    max_seq_len: int,
    eos_ids: Iterable[int],
    keep_prompt: bool = False,
    split: str | None = None,
    on_row=None,
) -> tuple[list[Example], DataStats]:
    """Examples of the given rows (loaded one at a time), dropping any longer than `max_seq_len` tokens.
    With `split`, a row its family labels with another split is skipped (a family whose `resolve`
    ignores the split must not slip test rows into training)."""
    stats = DataStats()
    examples = []
    for ref in refs:
        sample = family.load(ref)
        labelled = sample.columns.get("split")
        problem = "other_split" if split is not None and labelled and labelled != split else None
        problem = problem or target_problem(family, sample)
        if problem is not None:
            stats.skipped[problem] += 1
            continue
        example = single_pass_example(tokenizer, family, sample, text_budget_chars, eos_ids, keep_prompt=keep_prompt)
        if example.n_tokens > max_seq_len:
            stats.skipped["longer_than_max_seq_len"] += 1
        else:
            examples.append(example)
            stats.add(example)
        if on_row is not None:
            on_row()
    return examples, stats


# -- rlm-trajectories from eval results -----------------------------------------------------------


@dataclass
class Trajectory:
    row_id: str
    epoch: int
    split: str
    regime: str
    category: str
    score: float
    gold: dict
    messages: list[dict]  # role/content, as the policy saw them
    source: str  # run dir


def transcript_messages(transcript: list[dict]) -> list[dict]:
    """The conversation an RLM episode's policy saw, rebuilt from its transcript (harness/rlm.py).

    tool entries were shown as the next user message (their `observation` text); a notice was
    appended to the last user message; sub_rlm entries are nested episodes, not part of this chat.
    """
    messages: list[dict] = []
    for entry in transcript:
        role = entry.get("role")
        if role in ("system", "user", "assistant"):
            messages.append({"role": role, "content": entry["content"]})
        elif role == "tool":
            messages.append({"role": "user", "content": entry["observation"]})
        elif role == "notice":
            if not messages or messages[-1]["role"] != "user":
                raise ValueError("a notice that follows no user message")
            messages[-1] = {"role": "user", "content": f"{messages[-1]['content']}\n\n{entry['content']}"}
        elif role == "sub_rlm":
            continue
        else:
            raise ValueError(f"unknown transcript role {role!r}")
    if not messages or messages[-1]["role"] != "assistant":
        raise ValueError("the transcript does not end with an assistant reply")
    return messages


def results_fingerprint(run_dir: Path) -> dict[str, Any]:
    from tsbench import results

    files = [
        run_dir / name for name in (results.SAMPLES, results.JOURNAL, results.RUN_JSON) if (run_dir / name).is_file()
    ]
    info = {"path": str(run_dir), "files": {f.name: sha256_file(f) for f in files}}
    if (run_dir / results.RUN_JSON).is_file():
        run = results.load_run(run_dir)
        info.update(model=run.get("model"), harness=run.get("harness"), dataset_key=run.get("dataset", {}).get("key"))
    return info


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and value == value and abs(value) != float("inf")


def load_trajectories(
    run_dirs: list[str | Path], *, min_score: float, regimes: tuple[str, ...] | None, include_test_split: bool = False
) -> tuple[list[Trajectory], dict[str, Any]]:
    """Finished RLM episodes scoring at least `min_score`, from eval run dirs; identical ones kept once."""
    from tsbench import results as schema

    kept: list[Trajectory] = []
    skipped: Counter = Counter()
    seen: set[str] = set()
    for run_dir in map(Path, run_dirs):
        if not ((run_dir / schema.SAMPLES).is_file() or (run_dir / schema.JOURNAL).is_file()):
            raise UserError(f"no eval results in {run_dir} (expected {schema.SAMPLES}; run tsbench eval first)")
        samples = schema.load_samples(run_dir)
        for record in samples.to_dict("records"):
            if not str(record["harness"]).startswith("rlm"):
                skipped["not_an_rlm_run"] += 1
            elif isinstance(record["error_type"], str) or not _finite(record["score"]):
                skipped["error_row"] += 1
            elif record["split"] == "test" and not include_test_split:
                skipped["test_split"] += 1
            elif record["score"] < min_score:
                skipped["below_min_score"] += 1
            elif regimes is not None and record["regime"] not in regimes:
                skipped["other_regime"] += 1
            else:
                try:
                    messages = transcript_messages(transcript_events(record))
                except (ValueError, KeyError, TypeError):
                    skipped["unreadable_transcript"] += 1
                    continue
                digest = hashlib.sha256(json.dumps([record["id"], messages]).encode()).hexdigest()
                if digest in seen:
                    skipped["duplicate"] += 1
                    continue
                seen.add(digest)
                kept.append(
                    Trajectory(
                        record["id"],
                        int(record["epoch"]),
                        record["split"],
                        record["regime"],
                        record["category"],
                        float(record["score"]),
                        json.loads(record["gold"]),
                        messages,
                        str(run_dir),
                    )
                )
    return kept, {"kept": len(kept), "skipped": dict(skipped)}


def trajectory_example(
    tokenizer, trajectory: Trajectory, eos_ids: Iterable[int], *, keep_prompt: bool = False
) -> Example:
    ids, labels = encode_conversation(tokenizer, trajectory.messages, eos_ids)
    prompt = None
    if keep_prompt:
        prompt = [Message(m["role"], m["content"]) for m in trajectory.messages[:-1]]
    return Example(
        ids,
        labels,
        trajectory.row_id,
        trajectory.category,
        trajectory.regime,
        trajectory.split,
        trajectory.gold,
        prompt,
    )


def trajectory_examples(
    tokenizer, trajectories: list[Trajectory], *, max_seq_len: int, eos_ids: Iterable[int], keep_prompt: bool = False
) -> tuple[list[Example], DataStats]:
    stats = DataStats()
    examples = []
    for trajectory in trajectories:
        example = trajectory_example(tokenizer, trajectory, eos_ids, keep_prompt=keep_prompt)
        if example.n_tokens > max_seq_len:
            stats.skipped["longer_than_max_seq_len"] += 1
            continue
        examples.append(example)
        stats.add(example)
    return examples, stats


def split_trajectories(
    trajectories: list[Trajectory], *, val_rows: int, seed: int
) -> tuple[list[Trajectory], list[Trajectory]]:
    """(train, val). Val: episodes on val-split rows when there are train-split ones too; otherwise a
    seeded tenth of the row ids (at least one row when two or more rows exist). At most `val_rows`."""
    splits = {t.split for t in trajectories}
    if "val" in splits and splits - {"val"}:
        val = [t for t in trajectories if t.split == "val"]
        train = [t for t in trajectories if t.split != "val"]
        return train, val[:val_rows]  # val-split rows never train when there are others
    row_ids = sorted({t.row_id for t in trajectories})
    n_val = 0 if len(row_ids) < 2 else min(val_rows, max(1, len(row_ids) // 10))
    held = set(np.random.default_rng(seed).permutation(row_ids)[:n_val].tolist())
    val = [t for t in trajectories if t.row_id in held]
    train = [t for t in trajectories if t.row_id not in held]
    return train, val[:val_rows] if val_rows else []
