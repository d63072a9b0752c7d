"""What a harness takes (one task, never its gold) and what it gives back (one final message + a trace)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tsbench.core.episode import EpisodeOutcome, EpisodeResult, EpisodeTask, TaskInfo
from tsbench.core.settings import get, setting, specs


@dataclass
class RLMSettings:
    """[rlm]: the recursive language model harness's own settings."""

    SECTION: ClassVar[str] = "rlm"
    HARNESSES: ClassVar[tuple[str, ...]] = ("rlm", "rlm-image")

    depth: int = setting(0, "sub_rlm recursion depth.", ge=0)
    # The spec runs all blocks of a reply; a bound keeps one reply from holding the kernel for hours.
    max_blocks_per_reply: int = setting(
        16, "Code blocks run per model reply; the rest are skipped with a note in the observation.", ge=1
    )


@dataclass
class ToolsSettings:
    """[tools]: TimeClaw's tool-calling harness's own settings."""

    SECTION: ClassVar[str] = "tools"
    HARNESSES: ClassVar[tuple[str, ...]] = ("tools", "tools-image")

    tools_dir: str | None = setting(
        None, "Evolved tools: a folder of <name>/tool.json + tool.py (tsbench evolve --out).", aliases=("--tools",)
    )
    tool_protocol: str = setting(
        "auto",
        "Tool calls: native (OpenAI function calling), json (text protocol) or auto.",
        choices=("auto", "native", "json"),
    )
    max_tool_calls: int = setting(8, "Tool calls per model reply; calls beyond it get an error observation.", ge=1)


@dataclass
class MemorySettings:
    """[memory]: TimeClaw's episodic memory, around any model harness (timeclaw/memory_wrapper.py)."""

    SECTION: ClassVar[str] = "memory"
    HARNESSES: ClassVar[tuple[str, ...] | None] = None  # every harness (plugins' too)

    memory_bank: str | None = setting(
        None, "A bank parquet (tsbench memory build); retrieved precedents prefix the prompt.", aliases=("--memory",)
    )
    top_k: int = setting(3, "Precedents retrieved from memory_bank and injected.", ge=0)
    memory_pool: int = setting(20, "Stage-1 retrieval pool size N (cosine on the context embedding).", ge=1)
    memory_family_filter: bool = setting(False, "Only precedents of the task's own category.")
    memory_exclude_self: bool = setting(True, "Never retrieve the task's own record (bank and eval set may overlap).")
    embedder: str | None = setting(None, "Context encoder for queries [the one the bank was built with].")


@dataclass
class FileAgentSettings:
    """[file-agent]: TimeSage-EV's file agent, the paper's per-period limits and modes."""

    SECTION: ClassVar[str] = "file-agent"
    HARNESSES: ClassVar[tuple[str, ...]] = ("file-agent",)

    mode: str = setting(
        "independent",
        "TimeSage: independent (fresh state each period) or sequential (state, "
        "score feedback and compaction carried across a scenario's periods).",
        choices=("independent", "sequential"),
    )
    skills: bool = setting(
        False, "TimeSage: the TimeSage-1.0 skill library (induct_skill / retrieve_skill, usable from the next period)."
    )
    period_steps: int = setting(20, "TimeSage: model replies per period.", ge=1)
    period_wall_s: float = setting(
        2700.0, "TimeSage: seconds per period; past it the period ends without an answer.", gt=0
    )
    compaction_tokens: int = setting(
        64_000,
        "TimeSage sequential: compact memory at the next period boundary once a step's input exceeds this.",
        ge=1,
    )


@dataclass
class HarnessConfig(FileAgentSettings, MemorySettings, ToolsSettings, RLMSettings):
    """How one episode runs. Defaults are the paper's (spec/harness.md). The settings every harness
    shares are declared here; each harness's own are its section class above (RLMSettings, ...),
    whose fields this class inherits, so a harness reads `cfg.depth` while `[eval.rlm]` in TOML,
    --help and the checks know whose setting it is. Every field is a TOML key under [eval] or
    [grpo] and a flag of the same name; a setting of a section the chosen harness does not play is
    refused (`foreign_settings`)."""

    max_turns: int = setting(15, "Model replies per episode.", ge=1)
    observation_chars: int = setting(8192, "Characters of kernel output shown per turn.", ge=1)
    max_figures: int = setting(2, "Figures returned per turn (image harnesses).", ge=0)
    cell_timeout_s: float = setting(
        300.0, "Seconds per code cell before interrupt/restart.", gt=0, aliases=("--cell-timeout",)
    )
    memory_gib: float = setting(
        4.0, "Kernel memory cap in GiB, per kernel process (see harness/runtime for the whole-episode bound).", gt=0
    )
    cell_output_mib: float = setting(
        64.0,
        "MiB a code cell may send the host (output, results, figures); past it messages are dropped unread, "
        "and the observation says so.",
        gt=0,
    )
    episode_output_mib: float = setting(
        256.0, "MiB all of an episode's cells may send the host; past it, as past the cell's.", gt=0
    )
    unsafe_sandbox: bool = setting(
        False, "Run kernels WITHOUT the bubblewrap jail (recorded in run.json and shown by the leaderboard)."
    )
    max_tokens: int | None = setting(
        None, "Max tokens per model reply (also local models' max new tokens) [provider default].", ge=1
    )
    temperature: float | None = setting(None, "Sampling temperature [provider default].", ge=0)
    episode_token_cap: int | None = setting(
        None, "End an episode (as an error) past this many tokens, in + out, all turns.", ge=1
    )
    episode_wall_s: float | None = setting(
        None, "End an episode (as an error) past this many seconds.", gt=0, aliases=("--episode-timeout",)
    )
    text_budget_chars: int = setting(200_000, "single-pass-text: characters of serialized values.", ge=1)
    # A bound on host memory and on the row: a longer final answer is cut (the row's attributes say by how
    # much) before it is scored and stored; 1 MB is far beyond any answer schema.
    final_answer_chars: int = setting(
        1_000_000, "Characters of the final answer kept; the rest is cut before scoring (recorded in the row).", ge=1
    )

    answer_cut_replies: bool = setting(
        False,
        "Take a reply the token cap cut off as the final answer (off: such "
        "a reply is no answer and scores 0); for training rewards that read "
        "short capped replies.",
    )

    def foreign_settings(self, harness: str) -> list[str]:
        """Settings changed from their defaults that belong to a section `harness` does not play."""
        return [
            f"{s.name} ({s.flag}) is a setting of [{s.meta['section']}], which harness {harness} does not have"
            for s in specs(type(self))
            if HARNESS_SECTIONS.get(s.meta.get("section")) is not None
            and harness not in HARNESS_SECTIONS[s.meta["section"]]
            and get(self, s) != s.default
        ]


SECTIONS = (RLMSettings, ToolsSettings, MemorySettings, FileAgentSettings)
# section -> the harnesses that read it (None: every harness)
HARNESS_SECTIONS = {section.SECTION: section.HARNESSES for section in SECTIONS}


class EpisodeError(Exception):
    """The episode hit a cap (tokens, wall clock); the row is recorded as an error, not scored."""

    def __init__(self, kind: str, message: str, result: EpisodeResult | None = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.result = result


__all__ = [
    "EpisodeError",
    "EpisodeOutcome",
    "EpisodeResult",
    "EpisodeTask",
    "FileAgentSettings",
    "HarnessConfig",
    "MemorySettings",
    "RLMSettings",
    "TaskInfo",
    "ToolsSettings",
]
