"""What `tsbench eval` shows while it runs.

In a terminal: the configuration and the run dir on lines of their own (printed once the run starts,
so a long model name is never cut or broken mid-word), then one live line that fits the terminal's
width, dropping its least useful parts first at 80 columns. In a log (no terminal): the same line
every LOG_EVERY_S, even while no row finishes. Tokens move as an in-process model generates them
(models/streaming.py), not only when a row ends.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from rich.live import Live
from rich.text import Text

from tsbench.cli.common import err_console, is_terminal
from tsbench.models.streaming import METER

LOG_EVERY_S = 5.0
BAR_MIN, BAR_MAX = 8, 30


@dataclass(frozen=True)
class LineState:
    """One moment of a run, as the progress line shows it."""

    done: int
    total: int
    score: tuple[float, float] | None  # mean and standard error over scored rows
    errors: int
    tokens: int
    cost_usd: float
    elapsed_s: float
    eta_s: float | None


def clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def progress_text(state: LineState, width: int, bar: bool = True) -> str:
    """The line, at most `width` characters: parts go, least useful first, until it fits (no part is
    ever cut); a bar only where there is room left for one."""
    short = "score —" if state.score is None else f"score {state.score[0]:.3f}"
    parts = {
        "rows": f"{state.done}/{state.total} rows" if state.total else "selecting rows",
        "score": short if state.score is None else f"{short} ± {state.score[1]:.3f}",
        "errors": f"errors {state.errors}",
        "tokens": f"tokens {state.tokens:,}",
        "cost": f"${state.cost_usd:.2f}" if state.cost_usd else "",
        "elapsed": clock(state.elapsed_s),
        "eta": "" if state.eta_s is None else f"eta {clock(state.eta_s)}",
    }
    steps = [{}, {"score": short}, {"cost": ""}, {"eta": ""}, {"elapsed": ""}, {"tokens": ""}, {"errors": ""}]
    for step in steps:
        parts.update(step)
        text = "  ".join(v for v in parts.values() if v)
        if len(text) > width:
            continue
        room = width - len(text) - 2
        if bar and state.total and room >= BAR_MIN:
            n = min(room, BAR_MAX)
            filled = round(n * state.done / state.total)
            return text.replace(parts["rows"], f"{parts['rows']}  {'━' * filled}{'╌' * (n - filled)}", 1)
        return text
    return parts["rows"][:width]


class EvalDisplay:
    """Follows a RunProgress: a live line in a terminal, a line every LOG_EVERY_S in a log."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.progress = None
        self._started = time.monotonic()
        self._first: tuple[int, int] | None = None  # rows and tokens already there when this invocation began
        self._meter_start = METER.total()
        self._live: Live | None = None
        self._last_log = 0.0
        self._stop = threading.Event()
        self._terminal = is_terminal()
        self.shown_notes = 0  # notes printed at the start are not printed again at the end
        if not self._terminal:
            threading.Thread(target=self._heartbeat, name="eval-heartbeat", daemon=True).start()

    def state(self) -> LineState:
        p = self.progress
        if p is None:
            return LineState(0, 0, None, 0, 0, 0.0, time.monotonic() - self._started, None)
        records = p.input_tokens + p.output_tokens
        first_done, first_tokens = self._first or (p.done, records)
        streamed = first_tokens + METER.total() - self._meter_start  # in-process models: token by token
        elapsed = time.monotonic() - self._started
        new = p.done - first_done
        eta = elapsed / new * (p.total - p.done) if new and p.total else None
        return LineState(p.done, p.total, p.overall(), p.errors, max(records, streamed), p.cost_usd, elapsed, eta)

    def __rich__(self) -> Text:
        return Text(progress_text(self.state(), err_console.width), no_wrap=True, overflow="crop")

    def update(self, progress) -> None:
        self.progress = progress
        if self._first is None:
            self._first = (progress.done, progress.input_tokens + progress.output_tokens)
            self._announce(progress)
        if self._terminal:
            if self._live is None:
                self._live = Live(self, console=err_console.real, refresh_per_second=2, transient=False)
                self._live.start()
            self._live.refresh()
        elif time.monotonic() - self._last_log >= LOG_EVERY_S or progress.done == progress.total:
            self.log_line()

    def _announce(self, progress) -> None:
        """Where the rows go, whether this resumes a run (the default while the settings match), and
        the notes so far (a changed setting that moved the run to a new dir)."""
        resumed = f" (resuming: {progress.resumed} of {progress.total} rows already done)" if progress.resumed else ""
        err_console.print(Text(self.title, overflow="fold"))  # once the run starts: a refusal stays one line
        err_console.print(Text(f"run dir {progress.run_dir}{resumed}", overflow="fold"))
        for note in progress.notes:
            err_console.print(Text(f"note: {note}", overflow="fold"))
        self.shown_notes = len(progress.notes)

    def log_line(self) -> None:
        self._last_log = time.monotonic()
        err_console.print(progress_text(self.state(), 200, bar=False), markup=False, highlight=False)

    def _heartbeat(self) -> None:
        """A slow first row, a hung server: the log still shows the run is alive (and its tokens)."""
        while not self._stop.wait(LOG_EVERY_S):
            if self.progress is not None and time.monotonic() - self._last_log >= LOG_EVERY_S:
                self.log_line()

    def stop(self) -> None:
        self._stop.set()
        if self._live is not None:
            self._live.stop()
            self._live = None
