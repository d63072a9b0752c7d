"""The crash-safe journal: one JSON line per finished (id, epoch), written through to the OS at once.

`append` returns only once the whole line is in the kernel's page cache (an unbuffered write), so a
killed process (Ctrl-C, kill -9, a crash) loses no finished row. fsync, which only matters if the
machine itself goes down, is batched: at most every `FSYNC_EVERY_S` seconds or `FSYNC_EVERY_ROWS`
rows, and at close; an fsync per row was a measurable share of a fast run's per-row cost.

A later line for the same key supersedes an earlier one (an error row replaced on resume). The
reader is the only one in the project: eval, train, TimeClaw and the leaderboard all use it, so a
run killed mid-write (a torn last line) or a stray line reads the same everywhere.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from tsbench.core import json_input
from tsbench.core.unicode_text import ALTERED_ATTRIBUTE, valid_text
from tsbench.results.schema import COLUMN_NAMES, JOURNAL, is_record, key_of

FSYNC_EVERY_S = 1.0
FSYNC_EVERY_ROWS = 64


def _line(record: dict) -> bytes:
    """The record's journal line, UTF-8. Text that has no UTF-8 form (a lone surrogate a model sent)
    is made valid in `record` itself, so what runs on from it (progress, scoring summaries) matches
    the stored row, and the row's attributes say how many code points changed (`ALTERED_ATTRIBUTE`)."""
    row = {k: record[k] for k in COLUMN_NAMES}
    try:
        return (json.dumps(row, ensure_ascii=False, default=str) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        pass
    fixed, changed = valid_text(row)
    attributes = fixed.get("attributes")
    if isinstance(attributes, str):  # a journal row written before attributes became a map
        attributes = json_input.loads(attributes) if attributes else {}
    fixed["attributes"] = {**(attributes if isinstance(attributes, dict) else {}), ALTERED_ATTRIBUTE: str(changed)}
    record.update(fixed)
    return (json.dumps(fixed, ensure_ascii=False, default=str) + "\n").encode("utf-8", "replace")


class Journal:
    """Append-only JSONL of finished rows."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / JOURNAL
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = None
        self._unsynced = 0
        self._synced_at = time.monotonic()

    def append(self, record: dict) -> None:
        missing = set(COLUMN_NAMES) - set(record)
        if missing:
            raise ValueError(f"result record lacks columns {sorted(missing)}")
        if self._fh is None:
            self._open()
        data = memoryview(_line(record))
        start = os.lseek(self._fh.fileno(), 0, os.SEEK_END)
        try:
            while data:
                data = data[self._fh.write(data) :]
            self._unsynced += 1
            if self._unsynced >= FSYNC_EVERY_ROWS or time.monotonic() - self._synced_at >= FSYNC_EVERY_S:
                self.sync()
        except OSError as exc:  # a full disk: cut the torn line, so the journal stays whole for resume
            os.ftruncate(self._fh.fileno(), start)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def _open(self) -> None:
        """Append on a fresh line: a run killed mid-write leaves a torn last line, which the
        next record must not be glued onto."""
        self._fh = open(self.path, "a+b")
        if self._fh.tell() > 0:
            self._fh.seek(-1, os.SEEK_END)
            if self._fh.read(1) != b"\n":
                self._fh.write(b"\n")
        self._fh.close()
        self._fh = open(self.path, "ab", buffering=0)  # unbuffered: a failed write leaves nothing behind

    def sync(self) -> None:
        """fsync what was appended (also done by `close`)."""
        if self._fh is not None and self._unsynced:
            os.fsync(self._fh.fileno())
        self._unsynced, self._synced_at = 0, time.monotonic()

    def close(self) -> None:
        if self._fh is not None:
            self.sync()
            self._fh.close()
            self._fh = None


@dataclass
class JournalRead:
    records: list[dict]  # the latest record per (id, epoch), in first-seen order
    bad_lines: list[int] = field(default_factory=list)  # 1-based numbers of lines skipped

    def note(self) -> str | None:
        if not self.bad_lines:
            return None
        shown = ", ".join(map(str, self.bad_lines[:5])) + (" ..." if len(self.bad_lines) > 5 else "")
        return f"skipped {len(self.bad_lines)} unreadable journal line(s) (line {shown})"


def read_journal_report(run_dir: str | Path) -> JournalRead:
    path = Path(run_dir) / JOURNAL
    if not path.exists():
        return JournalRead([])
    latest: dict[tuple[str, int], dict] = {}
    bad: list[int] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json_input.loads(line)
            except ValueError:  # malformed, or nested too deeply to parse
                bad.append(number)
                continue
            if not is_record(record):
                bad.append(number)
                continue
            latest[key_of(record)] = record  # the latest line wins, kept where its key first appeared
    return JournalRead(list(latest.values()), bad)


def read_journal(run_dir: str | Path) -> list[dict]:
    return read_journal_report(run_dir).records
