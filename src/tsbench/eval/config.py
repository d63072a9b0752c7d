"""An evaluation run's settings: one dataclass, the harness's own nested in it.

Each field is declared once (default, docstring, bounds; core/settings.py): the CLI flags, the
TOML keys, the checks and the resume comparison derive from it. Every setting can change what a
row's answer would be, and a resumed run must match it, unless it is marked answers=False: what
rows are run (categories, lengths, --limit, ids, epochs) may change between invocations (the run
directory then holds the union, and a larger --limit extends it), and so may where results go and
how many episodes run at once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tsbench.core.sanitize import file_name_part
from tsbench.core.settings import answer_settings, setting
from tsbench.core.text import short_model_name
from tsbench.harness.settings import HarnessSettings, MemorySettings, harness_settings, memory_for
from tsbench.models.retry import DEFAULT_TIMEOUT_S, RetryPolicy

_RETRY = RetryPolicy()
DEFAULT_FAMILY = "anomalyxl"  # run names leave the default family out


def _no_answers(default, doc: str, **bounds):
    """A setting that picks rows, places results or paces the run: it cannot change an answer."""
    return setting(default, doc, answers=False, **bounds)


@dataclass
class JudgeSettings:
    """A judge: a model spec with its own provider options, never the evaluated model's (`eval`
    and `rescore` take them; a judged family's scorer gets the model built from them)."""

    judge: str | None = setting(
        None,
        "TimeSage: judge of coverage, faithfulness and quality, a model spec or judge/rules (offline) [judge/rules].",
    )
    judge_base_url: str | None = setting(
        None,
        "The judge's OpenAI-compatible server [OPENAI_BASE_URL; never --base-url, which is the evaluated model's].",
    )
    judge_api_key_env: str | None = _no_answers(
        None, "Environment variable holding the judge's API key [OPENAI_API_KEY]."
    )
    judge_timeout_s: float | None = setting(
        None, "Seconds per judge call before it is retried [provider default].", gt=0
    )
    judge_max_attempts: int | None = setting(None, "Tries per judge call [provider default].", ge=1)
    judge_max_tokens: int | None = setting(
        None,
        "Most tokens one judge reply may take (the paper's replies are a word or a short JSON) [provider default].",
        ge=1,
    )

    def judge_options(self) -> dict:
        """The judge model's own provider options (None values dropped); `api_key_env` is read where
        the judge's client is built (models/endpoint.py), so no key travels in a job."""
        options = {
            "base_url": self.judge_base_url,
            "timeout_s": self.judge_timeout_s,
            "max_attempts": self.judge_max_attempts,
            "api_key_env": self.judge_api_key_env,
        }
        return {k: v for k, v in options.items() if v is not None}


@dataclass
class EvalConfig(JudgeSettings):
    """`tsbench eval`: each field is a TOML key under [eval] and the flag of the same name (the
    judge's settings come from `JudgeSettings`)."""

    model: str = setting(
        "",
        "provider/name: gpt-4.1-mini, openai/..., vllm/<hf-id>, local/smollm2-135m, "
        "scripted/zscore, classical/<dir>, detector/default.",
    )
    harness: str = setting(
        "",
        "A registered harness ({harnesses}); `--harness X --help` lists X's own settings [rlm; direct for "
        "detector/ and classical/; the family's own where it has one].",
    )
    family: str = setting(DEFAULT_FAMILY, "Task family (or module:attribute for one of your own).")
    data: list[str] = setting(
        doc="Dataset file(s) or a seed dir [data/<family>/seed<seed>].", factory=list, answers=False
    )
    data_root: str | None = _no_answers(None, "Folder holding <family>/seed<seed> dataset dirs [data].")
    seed: int = _no_answers(42, "Dataset seed; also shuffles the --limit draw.")
    split: str = _no_answers("test", "Dataset split.")
    regime: str = _no_answers("both", "AnomalyXL: precise, coarse or both.", choices=("precise", "coarse", "both"))
    categories: list[str] | None = _no_answers(None, "Only these categories (comma-separated).")
    lengths: list[int] | None = _no_answers(None, "Only these series lengths (comma-separated).", ge=1)
    sample_ids: list[str] | None = setting(
        None, "Only these sample ids (repeat or comma-separate).", answers=False, aliases=("--sample-id",)
    )
    limit: int | None = _no_answers(
        None,
        "At most N rows in all (as inspect and lm-eval count), spread over categories and the "
        "family's strata, shuffled by --seed; a larger N extends the run (TimeSage sequential or "
        "with skills: N whole scenarios).",
        ge=1,
    )
    limit_per_category: int | None = _no_answers(
        None, "At most N rows of each category, drawn as --limit draws (with it: both hold).", ge=1
    )
    epochs: int = _no_answers(1, "Episodes per row.", ge=1)
    executor: str = _no_answers("threads", "threads (this process) or ray (pip install 'tsbench[ray]').")
    concurrency: int = setting(
        4,
        "Episodes in parallel (threads), or Ray workers (--workers N: the same setting).",
        ge=1,
        answers=False,
        aliases=("--workers",),
    )
    jail_pool: bool = _no_answers(
        True,
        "Pre-start jails ahead of the episodes, as many as the concurrency and the observed boot time call for "
        "(each serves one episode, then is destroyed).",
    )
    ray_address: str | None = _no_answers(None, "Ray cluster: auto or HOST:PORT [a local cluster].")
    base_url: str | None = setting(None, "OpenAI-compatible server URL [OPENAI_BASE_URL].")
    model_args: list[str] | None = setting(
        None,
        "-M KEY=VALUE provider options, repeatable (as inspect's -M): context_tokens=8192 (the context the "
        "single-pass text prompt must fit), device=cpu, dtype=..., threads=N (torch threads of a local/ "
        "model: half the usable cores by default), price=IN,OUT.",
        aliases=("-M",),
    )
    api_key_env: str | None = _no_answers(
        None,
        "Environment variable holding the API key for --base-url "
        "[OPENAI_API_KEY, which is sent to api.openai.com only].",
    )
    price: str | None = _no_answers(
        None,
        "IN,OUT dollars per million input and output tokens [list prices at "
        "api.openai.com only; elsewhere the cost is unknown].",
    )
    client_timeout_s: float | None = setting(
        None,
        f"Seconds per model call before it is retried [provider default: {DEFAULT_TIMEOUT_S:.0f}].",
        gt=0,
        aliases=("--client-timeout",),
    )
    max_attempts: int | None = setting(
        None,
        f"Tries per model call before the row becomes an error row [provider default: {_RETRY.max_attempts}].",
        ge=1,
    )
    retry_delay_s: float | None = setting(
        None,
        f"First retry's delay ceiling in seconds, doubled each retry; each wait is drawn at random below "
        f"it (full jitter) [provider "
        f"default: {_RETRY.base_delay_s:g}; 429s wait "
        f"{_RETRY.rate_limit_base_delay_s / _RETRY.base_delay_s:g}x longer].",
        ge=0,
        aliases=("--retry-delay",),
    )
    fail_on_error: float = _no_answers(
        0.0, "Error rows tolerated before a non-zero exit: a share below 1, a count from 1.", ge=0
    )
    out: str | None = _no_answers(None, "Run dir [results/<model>__<harness>].")
    log_dir: str | None = _no_answers(
        None, "Folder the run dir goes in when --out is not given (as inspect's) [results]."
    )
    new_run: bool = _no_answers(
        False,
        "A run dir of its own for this invocation, <log-dir>/<UTC time>_<run name> (inspect's one log per "
        "eval), never resuming one. Without it the same settings resume the run dir, and changed ones go to "
        "such a new dir (with --out: refused).",
    )
    overwrite: bool = _no_answers(False, "Discard an existing run with different settings.")
    allow_modified_data: bool = _no_answers(
        False,
        "Evaluate data files whose bytes differ from their manifest's "
        "sha256 (the run records the real hashes and is marked modified).",
    )
    report_to: list[str] | None = _no_answers(
        None, "Track the run: tensorboard and/or wandb (offline), under the run dir (pip install 'tsbench[tracking]')."
    )
    harness_config: HarnessSettings = field(default_factory=HarnessSettings)
    """The chosen harness's own settings (an instance of its settings class once it is chosen)."""
    memory: MemorySettings = field(default_factory=MemorySettings)
    harness_args: dict[str, Any] = field(default_factory=dict, metadata={"raw": True}, repr=False)
    """Harness settings as given ([eval.<harness>] tables, -H, flags) while the harness is not yet chosen."""

    @classmethod
    def from_values(cls, values: dict, *, where: str = "setting") -> Any:
        """Built from TOML and flag values: its own settings, then its harness's (harness/settings.py)."""
        from tsbench.harness.settings import build_run

        return build_run(cls, values, where=where)

    def choose_harness(self, name: str) -> Any:
        """The harness `name`, with `harness_config` built as its own settings, once (harness/settings.py);
        a setting it does not have is refused in one line."""
        from tsbench.harness.registry import get_harness

        harness = get_harness(name)
        self.harness = name
        self.harness_config = harness_settings(harness, self.harness_args, base=self.harness_config)
        self.harness_args = {}
        memory_for(harness, self.memory)
        return harness

    def to_dict(self) -> dict:
        return asdict(self)

    def model_options(self) -> dict:
        """Provider options (the registry rejects those a provider does not take); -M pairs last."""
        from tsbench.eval.model_args import parse_model_args

        return {
            "base_url": self.base_url,
            "timeout_s": self.client_timeout_s,
            "max_attempts": self.max_attempts,
            "retry_delay_s": self.retry_delay_s,
            "api_key_env": self.api_key_env,
            "price": self.price,
        } | parse_model_args(self.model_args)

    def filters(self) -> dict:
        return {"regime": self.regime, "lengths": self.lengths}


def result_settings(cfg: EvalConfig) -> dict:
    """Every setting that can change a row's answer (derived from the fields: those not marked
    answers=False), the chosen harness's own included: a resumed run must match them all."""
    return {**answer_settings(cfg), **answer_settings(cfg.harness_config)}


def settings_diff(old: dict, new: dict) -> list[str]:
    """`name: old -> new` for each recorded setting that differs (settings an older run did not
    record are not compared)."""
    return [f"{key}: {old[key]!r} → {new[key]!r}" for key in new if key in old and old[key] != new[key]]


def run_name(cfg: EvalConfig, settings: HarnessSettings) -> str:
    """The default run directory's name: the model by its short name (a path-named server model by its
    folder); `settings` are the harness's own (they add e.g. __d1, __sequential)."""
    slug = file_name_part(short_model_name(cfg.model))  # any model name makes a valid folder name
    family = "" if cfg.family == DEFAULT_FAMILY else f"{cfg.family.replace(':', '_').replace('.', '_')}__"
    judge = f"__judge-{cfg.judge.replace('/', '_').replace(':', '_')}" if cfg.judge else ""
    return f"{family}{slug}__{cfg.harness}{settings.name_suffix()}{judge}"
