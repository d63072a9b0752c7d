"""The run's cache of judge calls (judge_cache.jsonl) and a row's counted access to the judge: every
reply read by its kind's strict reader (judge.py), an unreadable one asked again up to READ_ATTEMPTS
times, then recorded as a judge error (axes.py scores that axis 0 and flags the row).

Every call is keyed by the sha256 of the judge name, the kind of call and the prompt (a judge that
reads the structured context hashes that too), so re-scoring a run with the same judge costs
nothing and a new judge's calls join the cache.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tsbench.tasks.timesage.judge import Judge, JudgeCall, JudgeReply, answer_object, echoed

READ_ATTEMPTS = 3  # one call and two retries with a reminder of the format


def _digested(context: dict) -> dict:
    """The context with each value that carries its own digest (the rules judge's lexicon) replaced by it."""
    return {k: v["digest"] if isinstance(v, dict) and "digest" in v else v for k, v in context.items()}


class JudgeCache:
    """judge_cache.jsonl in a run directory: one line per distinct call, appended and flushed;
    None keeps the cache in memory only. Safe to share between threads."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self._replies: dict[str, str] = {}
        self._lock = threading.Lock()
        if self.path is not None and self.path.exists():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                    self._replies[entry["key"]] = entry["reply"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a torn last line from a killed run

    @staticmethod
    def key(judge: Any, call: JudgeCall) -> str:
        basis = f"{getattr(judge, 'name', 'judge')}\n{call.kind}\n{call.prompt}"
        if getattr(judge, "reads_context", False):
            basis += "\n" + json.dumps(_digested(call.context), sort_keys=True, default=str)
        return hashlib.sha256(basis.encode("utf-8", "surrogatepass")).hexdigest()  # any text a model sent

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._replies.get(key)

    def put(self, key: str, judge_name: str, kind: str, reply: str) -> None:
        with self._lock:
            if key in self._replies:
                return
            self._replies[key] = reply
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps({"key": key, "judge": judge_name, "kind": kind, "reply": reply}) + "\n")

    def __len__(self) -> int:
        return len(self._replies)


class Asker:
    """One row's access to the judge: every call through the cache, counted."""

    def __init__(self, judge: Judge, cache: JudgeCache | None = None):
        self.judge = judge
        self.cache = cache if cache is not None else JudgeCache()
        self.calls = 0
        self.hits = 0
        self.errors = 0  # calls that failed (an outage) or stayed unreadable after every retry
        self.unparsed = 0  # replies the readers could not read (retried ones included)
        self.retries = 0
        self.tokens = 0  # judge tokens spent by this row's uncached calls (a cache hit costs nothing)
        self.cost_usd = 0.0
        self.unpriced = 0  # uncached model calls without a known price

    @property
    def name(self) -> str:
        return getattr(self.judge, "name", "judge")

    def read(self, call: JudgeCall, reader: Callable[[str], Any]) -> Any:
        """The reader's value of the judge's reply; an unreadable reply is asked again (the call with a
        reminder of the format), at most READ_ATTEMPTS calls; None: a judge error (counted)."""
        for attempt in range(READ_ATTEMPTS):
            if attempt:
                self.retries += 1
                call = call.again()
            reply = self.ask(call)
            if reply is None:  # the judge failed outright: asking again is the model client's business
                break
            value = reader(reply)
            if value is not None and not self._echoes(call, reply):
                return value
            self.unparsed += 1
        self.errors += 1
        return None

    def _echoes(self, call: JudgeCall, reply: str) -> bool:
        """A model judge's answer that the quoted report (or claim) itself carries is echoed text, unread."""
        if getattr(self.judge, "reads_context", False):
            return False
        value = answer_object(reply, call.kind)
        quoted = f"{call.context.get('claim') or ''}\n{call.context.get('report') or ''}"
        return value is not None and echoed(value, quoted)

    def ask(self, call: JudgeCall) -> str | None:
        """The reply, or None when the judge failed (`read` counts it as a judge error)."""
        self.calls += 1
        key = JudgeCache.key(self.judge, call)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        try:
            reply = self.judge(call)
        except Exception:  # a judge outage: a judge error on the axis, never a reading of the report
            return None
        if isinstance(reply, JudgeReply):
            self.tokens += reply.input_tokens + reply.output_tokens
            if reply.cost_usd is None:
                self.unpriced += 1
            else:
                self.cost_usd += reply.cost_usd
            reply = reply.text
        self.cache.put(key, self.name, call.kind, reply)
        return reply

    def spent_usd(self) -> float | None:
        """Dollars this row's judge calls cost; None when a call's price is unknown."""
        return None if self.unpriced else self.cost_usd
