"""pytest-timeout's `@pytest.mark.timeout(T)` as a hang guard that a loaded machine does not trip.

A marker's T is sized for a quiet 2-core machine; at a load of 20 the same work takes up to ten times the
wall time. At T this timer looks at the test's process tree (the pytest worker and every process below it,
jails and kernels included): a tree still working gets another `recheck_s`, up to T times the machine's
load factor in all; an idle one (a hang: sleeping on a pipe, a lock, a child that never ends) fails at T as
before. On a quiet machine nothing changes.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import pytest

from tsbench.core.deadline import load_factor
from tsbench.testing.readiness import Progress


class LoadAwareTimeout:
    """A pytest plugin (registered by tests/conftest.py where pytest-timeout is installed)."""

    def __init__(self, recheck_s: float = 30.0, load: Callable[[], float] = load_factor):
        self.recheck_s, self.load = recheck_s, load

    @pytest.hookimpl(tryfirst=True)
    def pytest_timeout_set_timer(self, item, settings):
        if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
            return None  # pytest-timeout's own timer
        import pytest_timeout

        started = time.monotonic()
        progress = Progress(os.getpid())
        peak = [self.load()]

        def expired(signum, frame):
            peak[0] = max(peak[0], self.load())
            elapsed = time.monotonic() - started
            if progress.advanced() and elapsed + self.recheck_s <= settings.timeout * peak[0]:
                signal.setitimer(signal.ITIMER_REAL, self.recheck_s)  # slow, not stuck: look again later
                return
            __tracebackhide__ = True
            pytest_timeout.timeout_sigalrm(item, settings)

        def cancel():
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)

        item.cancel_timeout = cancel
        signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, settings.timeout)
        return True
