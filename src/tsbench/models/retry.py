"""Retries for transient model failures: exponential backoff with jitter, capped in count and in time.

Kept pure (sleep, clock and randomness are injected) so the schedule can be tested without waiting.
Rate limits (429) back off from their own, longer base and honour a server's Retry-After hint;
5xx, timeouts and connection errors use the ordinary base. Anything else is raised at once.

Timeout and budget rule: each attempt may run for the per-call timeout, and the request's time
budget is `max_total_s` but never less than two full-length attempts plus the longest backoff
(`RetryPolicy.budget_s`). So a call that timed out is always retried at least once, and a larger
per-call timeout widens the budget instead of using it up.

The budget is a total: the caller's deadlines (core/deadline.py: an episode's wall clock, a cell's
timeout) shorten it, and no back-off is slept that would end past it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tsbench.core.deadline import remaining, tightest
from tsbench.models.base import Completion, ModelError

log = logging.getLogger(__name__)

T = TypeVar("T")


DEFAULT_TIMEOUT_S = 300.0  # per API call; a call that times out is retried like a 5xx (see budget_s)


@dataclass(frozen=True)
class RetryPolicy:
    """How many times and how long to retry.

    `jitter` is the randomised fraction of each delay: 1.0 is "full jitter" (uniform between 0 and the
    exponential ceiling, which spreads a burst of clients apart), 0.0 makes delays deterministic.
    """

    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    max_total_s: float = 300.0
    rate_limit_base_delay_s: float = 5.0
    jitter: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be between 0 and 1")

    def budget_s(self, call_timeout_s: float | None = None) -> float:
        """Seconds one request may take over all its attempts: `max_total_s`, widened to two attempts of
        `call_timeout_s` plus the longest backoff, so a timed-out call can always be retried once."""
        if call_timeout_s is None or self.max_attempts < 2:
            return self.max_total_s
        return max(self.max_total_s, 2.0 * float(call_timeout_s) + self.max_delay_s)

    def ceiling_for(self, attempt: int, kind: str) -> float:
        """The un-jittered delay after failed attempt number `attempt` (1-based)."""
        base = self.rate_limit_base_delay_s if kind == "rate_limit" else self.base_delay_s
        return min(self.max_delay_s, base * 2.0 ** max(0, attempt - 1))

    def delay_for(
        self,
        attempt: int,
        kind: str,
        rng: random.Random | None = None,
        retry_after_s: float | None = None,
    ) -> float:
        """Seconds to wait after failed attempt `attempt` of kind `kind` before trying again."""
        ceiling = self.ceiling_for(attempt, kind)
        draw = (rng or random).random()
        delay = ceiling * (1.0 - self.jitter * draw)
        if retry_after_s is not None and retry_after_s > 0:
            # The server knows when it will take us back; never come earlier than it asked.
            delay = max(delay, min(retry_after_s, self.max_delay_s))
        return delay


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.monotonic,
    label: str = "model call",
    call_timeout_s: float | None = None,
) -> T:
    """Call `fn` until it succeeds, retrying transient ModelErrors according to `policy`.

    On success a Completion gets `extra["attempts"]`, `extra["retry_wait_s"]` and `extra["failed_attempts"]`
    (the kinds of the attempts that failed). The time budget is `policy.budget_s(call_timeout_s)`.
    When the attempts or the budget run out, the last ModelError is re-raised with `.attempts` and
    `.elapsed_s` set; a non-transient
    ModelError is raised at once. Other exceptions are bugs, not model failures, and pass through.
    Every retry is logged as a warning naming `label` (the model and URL) and the attempt count, so a
    run that is slow because a server is failing says so.
    """
    start = clock()
    budget = remaining(policy.budget_s(call_timeout_s))
    outer = tightest()
    # The caller's deadline is what stops the retries when it leaves less than the policy's own budget.
    bound_by = outer.budget if outer is not None and budget < policy.budget_s(call_timeout_s) else None
    waited = 0.0
    attempt = 0
    failed: list[str] = []
    while True:
        attempt += 1
        try:
            result = fn()
        except ModelError as error:
            error.attempts = attempt
            error.elapsed_s = clock() - start
            failed.append(error.kind)
            if not error.retryable or attempt >= policy.max_attempts:
                raise
            delay = policy.delay_for(attempt, error.kind, rng, error.retry_after_s)
            if clock() - start + delay > budget:
                error.budget = bound_by or error.budget  # what left no time for another try
                log.warning(
                    "%s: giving up after attempt %d of %d: retry budget of %.0fs spent (%s)",
                    label,
                    attempt,
                    policy.max_attempts,
                    budget,
                    error,
                )
                raise
            log.warning(
                "%s: attempt %d of %d failed (%s); retrying in %.2fs", label, attempt, policy.max_attempts, error, delay
            )
            sleep(delay)
            waited += delay
            continue
        if isinstance(result, Completion):
            result.extra["attempts"] = attempt
            result.extra["retry_wait_s"] = round(waited, 3)
            result.extra["failed_attempts"] = failed
        return result
