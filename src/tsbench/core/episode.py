"""What one episode is about, as plain data: the task a harness runs, the view a policy gets, what it
gave back, and the error that ends it at one of its caps.

Defined in core so that task families (which build tasks) and harnesses (which run them) share
the type without importing each other. Neither type ever carries the gold answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tsbench.core.deadline import BudgetSpent

if TYPE_CHECKING:  # the series' type only: reading settings and --help never load numpy
    import numpy as np


@dataclass
class EpisodeTask:
    """One episode's input. `values` holds the series (channels x L) when the family has one;
    `files` are extra files the jail's working directory receives (name -> bytes)."""

    row_id: str
    category: str
    regime: str  # the family's subset of the row (AnomalyXL: precise | coarse)
    question: str
    channel_names: list[str] = field(default_factory=list)
    values: np.ndarray | None = None  # (channels, L) float32, or None for file-only tasks
    options: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)  # family facts a prompt may state (never gold)
    # The family's own picture of the series (PNG; TimerBed: the paper's plot); image harnesses show it
    # instead of their default plot. None: the harness draws the series.
    image: bytes | None = field(default=None, repr=False)

    @property
    def length(self) -> int:
        return 0 if self.values is None else int(self.values.shape[1])

    @property
    def series(self) -> dict[str, np.ndarray]:
        if self.values is None:
            return {}
        return dict(zip(self.channel_names, self.values))

    def info(self, *, code_execution: bool = False) -> TaskInfo:
        return TaskInfo(
            category=self.category,
            regime=self.regime,
            length=self.length,
            channel_names=list(self.channel_names),
            options=list(self.options),
            row_id=self.row_id,
            question=self.question,
            code_execution=code_execution,
            meta=dict(self.meta),
        )


@dataclass
class TaskInfo:
    """What a chat policy may know besides its messages: the question's structured form.

    Everything here is also in the prompt; the series values and the gold never are, so a
    scripted policy that reads this learns nothing an LLM could not read from the text.
    """

    category: str
    regime: str
    length: int
    channel_names: list[str]
    options: list[str] = field(default_factory=list)
    row_id: str = ""
    question: str = ""
    code_execution: bool = False  # True when the harness runs fenced code blocks (rlm): write code, not answers
    # Set by the tools harness: "native" (tools passed to generate) or "json" (the text tool-call protocol).
    tool_calling: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeResult:
    final_message: str = ""
    turns: int = 0
    code_cells: int = 0
    sub_calls: int = 0
    sub_call_tokens: int = 0
    forced_final: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    transcript: list[dict[str, Any]] = field(default_factory=list)
    # Per model reply: prompt and output token ids as generated (local models), for training.
    token_trace: list[dict[str, Any]] = field(default_factory=list)
    # Harness facts for the results row's `attributes` (strings) and `metrics` (numbers) maps.
    attributes: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    # One entry per model call (Completion.accounting(): finish_reason, usage, attempts, latency, ...);
    # a failed last call adds its error entry. Stored in the row's `calls` column.
    calls: list[dict[str, Any]] = field(default_factory=list)

    def add_completion(self, completion) -> None:
        """Count one model reply (a models.base.Completion)."""
        accounting = getattr(completion, "accounting", None)
        self.calls.append({"turn": self.turns + 1, **(accounting() if accounting else {})})
        self.turns += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        self.latency_s += completion.latency_s
        if completion.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + completion.cost_usd
        if completion.output_token_ids is not None:
            self.token_trace.append(
                {"prompt_ids": completion.prompt_token_ids, "output_ids": completion.output_token_ids}
            )


class EpisodeError(BudgetSpent):
    """The episode hit a cap (tokens, wall clock); the row is recorded as an error, not scored.
    A BudgetSpent: raised inside a sub_rlm episode it ends the row, never becomes a cell's observation."""

    def __init__(self, kind: str, message: str, result: EpisodeResult | None = None):
        super().__init__(kind, message)
        self.kind = kind
        self.result = result


KERNEL_LOST = "kernel_lost"  # the error kind of an episode whose kernel died or was restarted mid-cell


def end_if_kernel_lost(cell: Any, result: EpisodeResult | None) -> None:
    """A cell after which the sandbox had to restart the kernel (a crash, the memory bound, a signal, or
    no stop on interrupt) ends the episode as an error row, retried on resume: whatever the policy
    answered next would be scored as its answer to a lost kernel."""
    if getattr(cell, "restarted", False):
        why = (cell.error or "kernel restarted").strip().splitlines()[-1][:300]
        raise EpisodeError(KERNEL_LOST, f"the episode's kernel was lost mid-cell ({why})", result)


@dataclass
class EpisodeOutcome:
    """An episode as it ended: its result (None when it never got going) and, on failure, why.

    `error_type` is None for a finished episode; otherwise the row is an error row, never scored.
    """

    result: EpisodeResult | None
    error_type: str | None = None
    error: str | None = None
    attempts: int | None = None  # model calls tried for the failing call

    @property
    def finished(self) -> bool:
        return self.error_type is None and self.result is not None
