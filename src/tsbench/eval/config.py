"""An evaluation run's settings: one dataclass, the harness's own nested in it.

`RESULT_KEYS` are the settings that change what a row's answer would be: a resumed run must
match them. What rows are run (categories, lengths, --limit, ids, epochs) may change between
invocations: the run directory then holds the union, and a larger --limit extends it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tsbench.harness.episode import HarnessConfig


@dataclass
class EvalConfig:
    model: str = ""
    harness: str = ""  # empty: rlm for models, direct for reference policies
    family: str = "anomalyxl"
    data: list[str] = field(default_factory=list)  # dataset files or seed dirs; empty: <data_root>/seed<seed>
    data_root: str | None = None
    seed: int = 42
    split: str = "test"
    regime: str = "both"  # AnomalyXL: precise | coarse | both
    categories: list[str] | None = None
    lengths: list[int] | None = None
    sample_ids: list[str] | None = None
    limit: int | None = None  # rows per category, spread over the family's strata, shuffled by seed
    epochs: int = 1
    executor: str = "threads"  # threads | ray
    concurrency: int = 4  # episodes in flight (threads) or Ray workers
    ray_address: str | None = None
    base_url: str | None = None  # OpenAI-compatible server
    client_timeout_s: float | None = None  # per model call
    max_attempts: int | None = None  # model calls per request before an error row (provider default: 6)
    retry_delay_s: float | None = None  # first backoff delay; later ones double (provider default: 1 s)
    fail_on_error: float = 0.0  # tolerated error rows: a share below 1, a count from 1 (inspect's rule)
    out: str | None = None
    overwrite: bool = False
    report_to: list[str] | None = None  # tensorboard and/or wandb (offline), under the run dir
    judge: str | None = None  # families scored by a judge (TimeSage): a model spec or judge/rules [judge/rules]
    harness_config: HarnessConfig = field(default_factory=HarnessConfig)

    def to_dict(self) -> dict:
        return asdict(self)

    def model_options(self) -> dict:
        """Provider options (the registry rejects those a provider does not take)."""
        return {"base_url": self.base_url, "timeout_s": self.client_timeout_s, "max_attempts": self.max_attempts,
                "retry_delay_s": self.retry_delay_s}

    def filters(self) -> dict:
        return {"regime": self.regime, "lengths": self.lengths}


HARNESS_RESULT_KEYS = (
    "max_turns", "depth", "observation_chars", "max_figures", "max_tokens", "temperature", "episode_token_cap",
    "text_budget_chars", "tools_dir", "tool_protocol", "max_tool_calls", "memory_bank", "top_k", "memory_pool",
    "memory_family_filter", "memory_exclude_self", "embedder", "unsafe_sandbox",
    "mode", "skills", "period_steps", "period_wall_s", "compaction_tokens",
)
RESULT_KEYS = ("model", "family", "harness", "judge") + HARNESS_RESULT_KEYS


def result_settings(cfg: EvalConfig) -> dict:
    values = {**asdict(cfg.harness_config), **{k: v for k, v in asdict(cfg).items() if k != "harness_config"}}
    return {key: values[key] for key in RESULT_KEYS}


def run_name(cfg: EvalConfig) -> str:
    slug = cfg.model.replace("/", "_").replace(":", "_")
    family = "" if cfg.family == "anomalyxl" else f"{cfg.family.replace(':', '_').replace('.', '_')}__"
    depth = f"__d{cfg.harness_config.depth}" if cfg.harness_config.depth else ""
    hc = cfg.harness_config
    variant = (f"__{hc.mode}" if hc.mode != "independent" else "") + ("__skills" if hc.skills else "")
    judge = f"__judge-{cfg.judge.replace('/', '_').replace(':', '_')}" if cfg.judge else ""
    return f"{family}{slug}__{cfg.harness}{depth}{variant}{judge}"
