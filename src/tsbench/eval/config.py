"""An evaluation run's settings. `RESULT_KEYS` are the ones that change results: a resume must match them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class EvalConfig:
    model: str
    harness: str = "rlm"
    data: list[str] = field(default_factory=list)  # parquet files; filled from seed/split when empty
    seed: int = 42
    split: str = "test"
    data_root: str = "data/anomalyxl"
    regime: str = "both"  # precise | coarse | both
    categories: list[str] | None = None
    lengths: list[int] | None = None
    limit: int | None = None  # at most this many rows per category
    epochs: int = 1
    concurrency: int = 4
    max_turns: int = 15
    depth: int = 0
    max_tokens: int | None = None
    temperature: float | None = None
    cell_timeout_s: float = 300.0
    memory_gib: float = 4.0
    episode_token_cap: int | None = None
    episode_wall_s: float | None = None
    text_budget_chars: int = 200_000
    base_url: str | None = None
    tools_dir: str | None = None  # TimeClaw: evolved tools for --harness tools
    tool_protocol: str = "auto"
    memory_bank: str | None = None  # TimeClaw: episodic memory bank parquet
    top_k: int = 3
    out: str | None = None
    overwrite: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


RESULT_KEYS = (
    "model", "harness", "data", "regime", "categories", "lengths", "limit", "epochs", "max_turns", "depth",
    "max_tokens", "temperature", "text_budget_chars", "episode_token_cap", "tools_dir", "tool_protocol",
    "memory_bank", "top_k",
)


def run_name(cfg: EvalConfig) -> str:
    slug = cfg.model.replace("/", "_").replace(":", "_")
    return f"{slug}__{cfg.harness}" + (f"__d{cfg.depth}" if cfg.depth else "")
