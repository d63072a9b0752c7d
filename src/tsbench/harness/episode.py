"""What a harness takes (one task, never its gold) and what it gives back (one final message + a trace)."""

from __future__ import annotations

from dataclasses import dataclass

from tsbench.core.episode import EpisodeOutcome, EpisodeResult, EpisodeTask, TaskInfo


@dataclass
class HarnessConfig:
    """How one episode runs. Defaults are the paper's (spec/harness.md); every field is a TOML key
    under [eval] or [grpo], and the ones users change are CLI flags."""

    max_turns: int = 15
    depth: int = 0
    observation_chars: int = 8192
    max_figures: int = 2
    cell_timeout_s: float = 300.0
    memory_gib: float = 4.0  # per kernel process (see harness/runtime for the whole-episode bound)
    unsafe_sandbox: bool = False  # run kernels without the jail (recorded in run.json, shown by the leaderboard)
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
    # File agent (TimeSage-EV, harness "file-agent"): the paper's per-period limits and modes.
    mode: str = "independent"  # independent: fresh state each period; sequential: carried across a scenario
    skills: bool = False  # the TimeSage-1.0 skill library (induct_skill / retrieve_skill)
    period_steps: int = 20  # model replies per period
    period_wall_s: float = 2700.0  # seconds per period; past it the period ends without an answer
    compaction_tokens: int = 64_000  # compact at the next period boundary once a step's input exceeds this


class EpisodeError(Exception):
    """The episode hit a cap (tokens, wall clock); the row is recorded as an error, not scored."""

    def __init__(self, kind: str, message: str, result: "EpisodeResult | None" = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.result = result


__all__ = ["EpisodeError", "EpisodeOutcome", "EpisodeResult", "EpisodeTask", "HarnessConfig", "TaskInfo"]
