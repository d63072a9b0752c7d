"""Optional packages: a command whose extra is not installed says which one to install, in one line.

The base install (`pip install tsbench`) runs generate, eval (API and vLLM models), score, show and
leaderboard. Heavier features live in extras (see pyproject.toml); every import of an optional
package on a command's path goes through `require`, so a missing one is a UserError (exit 2), not a
traceback from deep inside an episode.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from tsbench.core.errors import UserError

# What each extra is for, shown in the message.
EXTRAS = {
    "local": "in-process transformers models (local/...)",
    "classical": "the classical features + XGBoost baseline (classical/...)",
    "train": "training (sft-baseline, train-grpo)",
    "timeclaw": "TimeClaw tools, memory embeddings and tool evolution",
    "ray": "the ray executor",
    "gpu": "vLLM models",
    "inspect": "inspect_ai interop (export --format inspect, inspect eval tsbench/...)",
    "tracking": "experiment tracking (--report-to)",
    "tslm": "the TSLM baselines (tslm/...: Chronos-2 encoder + LoRA backbone)",
}


class MissingExtra(UserError):
    """An optional package is not installed; the message names the extra that brings it."""

    def __init__(self, package: str, extra: str, what: str | None = None):
        self.package, self.extra = package, extra
        purpose = what or EXTRAS.get(extra, extra)
        super().__init__(f"{purpose} needs the optional package {package!r}: pip install 'tsbench[{extra}]'")


def _distribution_of(module: str) -> str:
    """The package name people install, for the few whose import name differs."""
    return {"sklearn": "scikit-learn", "yaml": "pyyaml", "chronos": "chronos-forecasting"}.get(module, module)


def available(module: str) -> bool:
    """Whether `module` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module with no spec
        return False


def check(*modules: str, extra: str, what: str | None = None) -> None:
    """Fail with MissingExtra unless every module can be imported (nothing is imported: cheap)."""
    for module in modules:
        if not available(module):
            raise MissingExtra(_distribution_of(module.split(".")[0]), extra, what)


def require(module: str, *, extra: str, what: str | None = None) -> ModuleType:
    """Import `module`, or fail with MissingExtra naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = (exc.name or module).split(".")[0]
        if top != module.split(".")[0] and available(module.split(".")[0]):
            raise  # the package is there but broken: its own error says more
        raise MissingExtra(_distribution_of(top), extra, what) from None


__all__ = ["EXTRAS", "MissingExtra", "available", "check", "require"]
