"""Harnesses: each runs one episode (task in, final message + trace out) and knows nothing of runs.

A harness is a function (agent, EpisodeTask, HarnessConfig) -> EpisodeResult; a new one is one
line in HARNESSES, or, from outside tsbench, a `harness.<name>` entry point in the `tsbench.plugins`
group (see tsbench.core.registry). `play` is the one way every caller (eval, training, TimeClaw) runs an episode:
it never raises for what a model, the jail or the episode's caps do; those become the outcome's
error, which the record builder turns into an error row.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

from tsbench.core.errors import UserError
from tsbench.core.registry import Registry
from tsbench.harness.accounting import CallLedger
from tsbench.harness.episode import EpisodeError, EpisodeOutcome, EpisodeResult, EpisodeTask, HarnessConfig
from tsbench.harness.final_answer import cap_final_answer
from tsbench.harness.runtime.sandbox import SandboxError
from tsbench.models.base import ModelError

# name -> Target(module, function, keyword arguments); plugins' harnesses follow the built-ins
HARNESSES = Registry(
    "harness",
    {
        "single-pass-text": ("tsbench.harness.single_pass:run_single_pass", {"image": False}),
        "single-pass-image": ("tsbench.harness.single_pass:run_single_pass", {"image": True}),
        "rlm": ("tsbench.harness.rlm:run_rlm", {"image": False}),
        "rlm-image": ("tsbench.harness.rlm:run_rlm", {"image": True}),
        "tools": ("tsbench.harness.tools:run_tools", {"image": False}),
        "tools-image": ("tsbench.harness.tools:run_tools", {"image": True}),
        "direct": "tsbench.harness.direct:run_direct",
        "series": "tsbench.harness.series:run_series",  # TSLMs: the values beside the prompt, no text
        "file-agent": "tsbench.harness.file_agent:run_file_agent",
    },
)
REFERENCE_HARNESSES = ("direct",)  # played by reference policies, never by chat models
KERNEL_HARNESSES = ("rlm", "rlm-image", "tools", "tools-image", "file-agent")  # model code runs in a jailed kernel


def require_jail(harness: str, unsafe_sandbox: bool) -> None:
    """One clear line before any episode (eval or training) where this harness's kernels cannot be jailed."""
    if harness in KERNEL_HARNESSES and not unsafe_sandbox:
        from tsbench.harness.runtime import check_jail

        try:
            check_jail()
        except SandboxError as exc:
            raise UserError(str(exc)) from None


Harness = Callable[[Any, EpisodeTask, HarnessConfig], EpisodeResult]


@functools.cache
def get_harness(name: str) -> Harness:
    """The harness `name` stands for (an unknown name is a UserError listing the choices)."""
    return HARNESSES.load(name)


def play(agent: Any, harness: str | Harness, task: EpisodeTask, cfg: HarnessConfig) -> EpisodeOutcome:
    """Run one episode and say how it ended."""
    run = get_harness(harness) if isinstance(harness, str) else harness
    # Whatever ends the episode, its row keeps what the calls so far spent (harness/accounting.py).
    ledger = CallLedger(agent) if callable(getattr(agent, "generate", None)) else None

    def spent(kept: EpisodeResult | None = None) -> EpisodeResult | None:
        return kept if isinstance(kept, EpisodeResult) else (ledger.partial() if ledger is not None else None)

    try:
        return EpisodeOutcome(
            cap_final_answer(run(agent if ledger is None else ledger, task, cfg), cfg.final_answer_chars)
        )
    except ModelError as exc:
        result = spent(exc.result)
        if result is not None:
            result.calls.append({"turn": result.turns + 1, **exc.accounting()})
        return EpisodeOutcome(result, exc.kind, str(exc), exc.attempts)
    except EpisodeError as exc:
        return EpisodeOutcome(spent(exc.result), exc.kind, str(exc))
    except SandboxError as exc:
        return EpisodeOutcome(spent(), "sandbox", str(exc))
    except Exception as exc:  # a bug must not kill a long run; it is recorded with its traceback
        return EpisodeOutcome(spent(), "internal", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")


__all__ = [
    "HARNESSES",
    "REFERENCE_HARNESSES",
    "EpisodeError",
    "EpisodeOutcome",
    "EpisodeResult",
    "EpisodeTask",
    "Harness",
    "HarnessConfig",
    "get_harness",
    "play",
]
