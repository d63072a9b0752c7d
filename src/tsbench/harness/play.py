"""`play`: the one way every caller (eval, training, TimeClaw, interop) runs an episode.

It never raises for what a model, the jail or the episode's caps do: those become the outcome's
error, which the record builder turns into an error row. Settings that the harness does not read
are refused before the episode starts (harness/settings.py), so nothing is silently ignored.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from tsbench.core.deadline import within
from tsbench.core.episode import EpisodeError, EpisodeOutcome, EpisodeResult, EpisodeTask
from tsbench.core.errors import UserError
from tsbench.harness.accounting import CallLedger
from tsbench.harness.base import FunctionHarness, Harness
from tsbench.harness.registry import get_harness
from tsbench.harness.runtime.errors import SandboxError
from tsbench.models.base import ModelError, as_agent


def play(agent: Any, harness: str | Harness | Callable, task: EpisodeTask, cfg: Any) -> EpisodeOutcome:
    """Run one episode of `harness` (a name, a Harness, or a bare episode function) and say how it
    ended. `cfg` is the harness's own settings or any HarnessSettings (a changed
    setting it does not read is a UserError, raised before the episode)."""
    run = _harness(harness)
    settings = run.settings(cfg)

    def episode(a: Any) -> EpisodeResult:
        with within(settings.episode_wall_s, "wall_clock"):  # also over a one-call harness's call
            return run.run(a, task, settings)

    return episode_outcome(agent, episode, settings.final_answer_chars)


def episode_outcome(agent: Any, episode: Callable[[Any], EpisodeResult], final_answer_chars: int) -> EpisodeOutcome:
    """`episode(agent)` with its failures recorded: what the calls so far spent stays on the outcome
    (harness/accounting.py) and the final answer is capped (`cap_final_answer`)."""
    agent = as_agent(agent)
    ledger = CallLedger(agent) if agent.chats() else None

    def spent(kept: EpisodeResult | None = None) -> EpisodeResult | None:
        return kept if isinstance(kept, EpisodeResult) else (ledger.partial() if ledger is not None else None)

    try:
        return EpisodeOutcome(cap_final_answer(episode(agent if ledger is None else ledger), final_answer_chars))
    except ModelError as exc:
        result = spent(exc.result)
        if result is not None:
            result.calls.append({"turn": result.turns + 1, **exc.accounting()})
        # A call cut by the episode's wall clock names the clock, as a turn loop's cap does.
        kind = "wall_clock" if exc.budget == "wall_clock" else exc.kind
        return EpisodeOutcome(result, kind, str(exc), exc.attempts)
    except EpisodeError as exc:
        return EpisodeOutcome(spent(exc.result), exc.kind, str(exc))
    except SandboxError as exc:
        return EpisodeOutcome(spent(), "sandbox", str(exc))
    except Exception as exc:  # a bug must not kill a long run; it is recorded with its traceback
        return EpisodeOutcome(spent(), "internal", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")


def _harness(harness: str | Harness | Callable) -> Harness:
    if isinstance(harness, str):
        return get_harness(harness)
    return harness if isinstance(harness, Harness) else FunctionHarness(harness)


def require_jail(harness: str | Harness, unsafe_sandbox: bool) -> None:
    """One clear line before any episode (eval or training) where this harness's kernels cannot be jailed."""
    run = _harness(harness)
    if run.kernel and not unsafe_sandbox:
        from tsbench.harness.runtime import check_jail

        try:
            check_jail()
        except SandboxError as exc:
            raise UserError(str(exc)) from None


# The cap on a model's final answer: a 100 MB answer must not reach the scorer or the row whole. The first
# `max_chars` characters are kept, ended by a marker saying how many were cut; the count goes in the row's
# attributes, and the transcript's copy is cut the same way (the row builder stores it once: results/records.py).
CUT_ATTRIBUTE = "final_answer_cut_chars"


def answer_marker(count: int) -> str:
    return f"\n[... final answer cut: {count} more characters ...]"


def cap_final_answer(result: EpisodeResult, max_chars: int) -> EpisodeResult:
    """`result` with its final message (and the transcript's copy of it) cut to `max_chars`."""
    message = result.final_message
    if len(message) <= max_chars:
        return result
    cut = message[:max_chars] + answer_marker(len(message) - max_chars)
    for event in reversed(result.transcript):
        if event.get("content") is message or event.get("content") == message:
            event["content"] = cut
            break
    result.final_message = cut
    result.attributes[CUT_ATTRIBUTE] = str(len(message) - max_chars)
    return result
