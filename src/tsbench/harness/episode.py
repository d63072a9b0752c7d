"""What a harness takes (one task, never its gold) and what it gives back (one final message + a trace)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tsbench.models.base import Completion, TaskInfo


@dataclass
class EpisodeTask:
    row_id: str
    category: str
    regime: str
    question: str
    channel_names: list[str]
    values: np.ndarray  # (channels, L) float32
    options: list[str] = field(default_factory=list)

    @property
    def length(self) -> int:
        return int(self.values.shape[1])

    @property
    def series(self) -> dict[str, np.ndarray]:
        return dict(zip(self.channel_names, self.values))

    def info(self, *, code_execution: bool = False) -> TaskInfo:
        return TaskInfo(
            category=self.category, regime=self.regime, length=self.length, channel_names=list(self.channel_names),
            options=list(self.options), row_id=self.row_id, question=self.question, series=self.series,
            code_execution=code_execution,
        )


@dataclass
class HarnessConfig:
    """Defaults are the paper's (spec/harness.md); every one is a CLI flag."""

    max_turns: int = 15
    depth: int = 0
    observation_chars: int = 8192
    max_figures: int = 2
    cell_timeout_s: float = 300.0
    memory_bytes: int = 4 * 2**30
    max_tokens: int | None = None  # per model reply
    temperature: float | None = None
    episode_token_cap: int | None = None  # total tokens in + out, all turns
    episode_wall_s: float | None = None
    text_budget_chars: int = 200_000  # single-pass-text: serialized values must fit in this
    # TimeClaw (harness "tools"/"tools-image" and episodic memory); the paper's defaults.
    tools_dir: str | None = None  # evolved tools: a folder of <name>/tool.json + tool.py (tsbench evolve --out)
    tool_protocol: str = "auto"  # "native" (OpenAI function calling), "json" (text protocol) or "auto"
    max_tool_calls: int = 8  # per model reply; calls beyond it get an error observation
    memory_bank: str | None = None  # a bank parquet (tsbench memory build); retrieved precedents prefix the prompt
    top_k: int = 3  # precedents injected
    memory_pool: int = 20  # stage-1 pool size N (cosine on the context embedding)
    memory_family_filter: bool = False  # only precedents of the task's own category
    memory_exclude_self: bool = True  # never retrieve the task's own record (bank and eval set may overlap)
    embedder: str | None = None  # context encoder for queries; None: the one the bank was built with


class EpisodeError(Exception):
    """The episode hit a cap (tokens, wall clock); the row is recorded as an error, not scored."""

    def __init__(self, kind: str, message: str, result: "EpisodeResult | None" = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.result = result


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

    def add_completion(self, completion: Completion) -> None:
        self.turns += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        self.latency_s += completion.latency_s
        if completion.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + completion.cost_usd
        if completion.output_token_ids is not None:
            self.token_trace.append({"prompt_ids": completion.prompt_token_ids, "output_ids": completion.output_token_ids})
