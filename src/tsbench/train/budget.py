"""Does an episode's first prompt leave room for a reply under `max_seq_len`? Checked before the policy loads.

The prompt is measured, not estimated: the family's first training task is played through the run's
harness by a probe that tokenizes the first prompt with the model's own tokenizer and chat template
(the `ChatTokens` the rollouts use) and stops the episode there. Series text tokenizes very
differently across tokenizers (Qwen's splits every digit), so no chars-per-token rule would hold.
A kernel harness (rlm, tools) keeps the series in its kernel and needs the jail to build its prompt:
there the question alone is measured, a lower bound of the first prompt.
A run is refused when first prompt + one reply (`max_tokens`) exceeds `max_seq_len`: such a reply
is cut by the context, or, with the prompt alone over it, the episode fails before it generates.
"""

from __future__ import annotations

import sys
from typing import Any

from tsbench.core.errors import UserError
from tsbench.harness import get_harness, play
from tsbench.models.base import Message, ModelError
from tsbench.tasks import get_taskset
from tsbench.timeclaw.memory_wrapper import Remembering, with_memory
from tsbench.train.chat_tokens import ChatTokens
from tsbench.train.curriculum import parse_key, task_key
from tsbench.train.rewards import as_asked


class _Probe:
    """A chat model that measures the first prompt it is sent and ends the episode there."""

    def __init__(self, chat: ChatTokens):
        self.chat = chat
        self.tokens: int | None = None

    def generate(self, messages: list[Message], **_: Any) -> Any:
        self.tokens = len(self.chat.first_prompt_vision(messages)[0])  # a VLM's image tokens counted
        raise ModelError("bad_request", "measured the first prompt")

    def close(self) -> None:
        """Nothing to release."""


def first_prompt_tokens(cfg: Any, tokenizer: Any, processor: Any = None) -> int:
    """Tokens of the first prompt of the run's first training task (`cfg` is a GRPOConfig)."""
    task = cfg.training_stream().sample(*parse_key(task_key(1, 0))).task
    task = as_asked(get_taskset(cfg.tasks.family), cfg.rewards, task)  # as the rollouts ask it
    chat = ChatTokens(tokenizer, processor)
    harness, settings = cfg.episode_setup()  # the memory wrapper around it where [memory] names a bank
    if harness.kernel:
        if isinstance(harness, Remembering):  # the precedents the wrapper prefixes
            task, _ = with_memory(task, harness.memory_settings)
        return len(chat.first_prompt([Message("user", task.question)]))
    probe = _Probe(chat)
    play(probe, harness, task, settings)
    return probe.tokens or 0


def check_reasoning_history(cfg: Any, tokenizer: Any) -> tuple[str, str | None]:
    """How later turns' contexts are built (`RolloutConfig.reasoning_history` resolved), and a warning line
    when train and eval contexts will differ (None when they match).

    Only a multi-turn run whose template drops earlier reasoning has a choice to make: as-rendered (auto's
    pick) renders every turn's prompt as eval does and trains each turn as its own row; as-generated keeps one
    row per episode and warns; refuse stops. Another harness (single-pass, the image harnesses) keeps one row."""
    harness = get_harness(cfg.harness)
    if not harness.kernel or cfg.harness_config.max_turns <= 1:
        return "as-generated", None
    asked = cfg.rollout.reasoning_history
    # at most max_turns calls per episode, a row each (a VLM's idle vision tower changes nothing)
    rows_possible = harness.turn_rows
    if ChatTokens(tokenizer).keeps_earlier_reasoning():
        return ("as-rendered" if asked == "as-rendered" and rows_possible else "as-generated"), None
    line = (
        f"{cfg.policy.model}'s chat template drops earlier replies' reasoning: training extends each turn by the "
        f"reply as generated (reasoning included), so {cfg.harness}'s later turns will see less in eval than in training"
    )
    if asked == "refuse":
        raise UserError(f"{line} (reasoning_history = refuse; as-rendered trains on eval's contexts)")
    if asked in ("auto", "as-rendered") and rows_possible:
        return "as-rendered", None
    if asked == "as-rendered":
        raise UserError(
            f"reasoning_history = as-rendered trains each turn as its own row, which --harness {cfg.harness} does not "
            "support "
            "(harnesses of one conversation, such as rlm and tools); set as-generated to train anyway"
        )
    return "as-generated", line


def check_context(cfg: Any, tokenizer: Any, *, processor: Any = None) -> str:
    """One line (exit 2) when the first prompt and one reply do not fit `max_seq_len`; a warning on stderr
    when train and eval contexts will differ. Returns the reasoning-history mode (`check_reasoning_history`)."""
    mode, warning = check_reasoning_history(cfg, tokenizer)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    prompt = first_prompt_tokens(cfg, tokenizer, processor)
    reply = cfg.harness_config.max_tokens or 1
    if prompt + reply > cfg.max_seq_len:
        lower = " (the question alone)" if get_harness(cfg.harness).kernel else ""
        raise UserError(
            f"{cfg.tasks.family} under {cfg.harness}: the first prompt takes {prompt} tokens{lower} with "
            f"{cfg.policy.model}'s tokenizer; with a {reply}-token reply (max_tokens) that exceeds max_seq_len "
            f"{cfg.max_seq_len}: lower text_budget_chars or max_tokens, or raise --max-seq-len"
        )
    return mode
