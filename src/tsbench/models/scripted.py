"""`scripted/zscore`: a deterministic, non-LLM reference policy that plays every harness.

Under a code harness (rlm) it writes real Python: `analyse` below is shipped into the kernel as
source, run there over `series`, and its printed summary is read back on the next turn to answer
in the task's schema. Under single-pass harnesses it runs the same `analyse` on the task's series
itself. It is the harness's model-free test driver and a floor any LLM should beat.
"""

from __future__ import annotations

import inspect
import json
import re
import time

from tsbench.anomalyxl import labels as lb
from tsbench.anomalyxl.mcq import magnitude_band, start_bin
from tsbench.models.base import Completion, Message, TaskInfo

SUMMARY_TAG = "ZSCORE_SUMMARY"
PRESENT_Z = 6.0  # smoothed robust |z| above which a channel counts as anomalous


def analyse(series, smooth=8, detrend=513):
    """Per channel: the strongest robust-z excursion of the detrended series and its window."""
    import numpy as np
    from scipy.ndimage import uniform_filter1d

    out = {}
    for name, values in series.items():
        x = np.asarray(values, dtype=np.float64)
        resid = x - uniform_filter1d(x, size=min(detrend, len(x)), mode="nearest")
        med = np.median(resid)
        mad = 1.4826 * np.median(np.abs(resid - med)) + 1e-12
        score = uniform_filter1d(np.abs(resid - med) / mad, size=smooth, mode="nearest")
        peak = int(np.argmax(score))
        top = float(score[peak])
        cut = max(2.5, 0.35 * top)
        start, end = peak, peak + 1
        while start > 0 and score[start - 1] > cut:
            start -= 1
        while end < len(x) and score[end] > cut:
            end += 1
        sd = float(np.std(x)) or 1.0
        inside = x[start:end]
        before = x[max(0, start - 256):start]
        after = x[end:end + 256]
        around = np.concatenate([before, after]) if len(before) + len(after) else x
        shift = (float(np.mean(inside)) - float(np.mean(around))) / sd
        step = (float(np.mean(after)) - float(np.mean(before))) / sd if len(before) and len(after) else 0.0
        centred = inside - np.mean(inside)
        crossings = int(np.sum(np.abs(np.diff(np.sign(centred))) > 0)) if len(inside) > 2 else 0
        var_ratio = float(np.std(resid[start:end]) / (np.std(np.concatenate([resid[:start], resid[end:]])) + 1e-12))
        mid = len(inside) // 2
        peaky = len(inside) > 4 and abs(inside[mid] - np.mean(around)) > 1.5 * abs(np.mean(inside) - np.mean(around))
        if abs(step) > 0.6 * max(abs(shift), 1e-9) and abs(step) > 1.0:
            kind = "Change in Trend"
        elif var_ratio > 2.0 and abs(shift) < 0.5 * var_ratio:
            kind = "Change in Seasonality" if crossings > len(inside) / 8 and crossings < len(inside) / 2 else "Change in Variance"
        elif peaky:
            kind = "Transient Spike"
        else:
            kind = "Level Shift"
        out[name] = {"max_z": round(top, 3), "start": start, "end": end, "shift_sigma": round(abs(shift), 3), "kind": kind}
    return out


ANALYSIS_CELL = (
    inspect.getsource(analyse)
    + f"\nimport json\nprint('{SUMMARY_TAG}', json.dumps(analyse(series)))\n"
)


def _option(options: list[str], wanted: str) -> str:
    return wanted if wanted in options or not options else options[0]


def decide(task: TaskInfo, summary: dict) -> str:
    """Turn the per-channel summary into an answer in the task's schema."""
    names = task.channel_names
    best = max(names, key=lambda n: summary[n]["max_z"])
    s = summary[best]
    present = s["max_z"] > PRESENT_Z
    c, L = task.category, task.length
    if c == lb.LOCALIZE:
        return json.dumps({"present": True, "start": s["start"], "end": s["end"]} if present else {"present": False})
    if c == lb.CLASSIFY:
        return json.dumps({"kind": s["kind"], "start": s["start"], "end": s["end"]})
    if c == lb.MAGNITUDE:
        return json.dumps({"magnitude_sigma": max(s["shift_sigma"], 0.5)})
    flagged = sorted((n for n in names if summary[n]["max_z"] > PRESENT_Z), key=lambda n: -summary[n]["max_z"])[:3]
    if c == lb.ALL_CHANNELS:
        events = [{"channel": n, "start": summary[n]["start"], "end": summary[n]["end"]} for n in sorted(flagged)]
        return json.dumps({"anomalies": events})
    a, b = summary[names[0]]["start"], summary[names[-1]]["start"]
    direction = "independent" if abs(a - b) > L / 4 else ("lead" if a <= b else "lag")
    if c == lb.LEAD_LAG:
        return json.dumps({"direction": direction, "lag_samples": 0 if direction == "independent" else abs(a - b)})
    opts = task.options
    if c == lb.PRESENCE:
        answer = lb.YES if present else lb.NO
    elif c == lb.START_TIME:
        answer = start_bin(s["start"], L) if present else lb.NO_ANOMALY_OPTION
    elif c == lb.CATEGORIZATION:
        answer = s["kind"]
    elif c == lb.MAGNITUDE_BAND:
        answer = magnitude_band(s["shift_sigma"])
    elif c == lb.IDENTIFICATION:
        asked = [set(o.split(", ")) for o in opts if o != lb.IDENTIFICATION_NONE]
        named = set().union(*asked) if asked else set()
        hit = ", ".join(sorted(n for n in flagged if n in named))
        answer = hit or lb.IDENTIFICATION_NONE
    elif c == lb.INDICATOR:
        answer = lb.DIRECTION_TO_INDICATOR[direction]
    else:
        raise ValueError(f"scripted policy has no rule for category {c!r}")
    return json.dumps({"answer": _option(opts, answer)})


class ZScorePolicy:
    def __init__(self) -> None:
        self.name = "scripted/zscore"

    def generate(self, messages: list[Message], *, max_tokens=None, temperature=None, task: TaskInfo | None = None) -> Completion:
        started = time.perf_counter()
        if task is None:
            raise ValueError("scripted/zscore needs the task's TaskInfo (it is a reference policy, not a chat model)")
        if task.code_execution:
            summary = _read_summary(messages)
            if summary is None and not any(m.role == "assistant" for m in messages):
                text = f"I will compute robust z-scores per channel.\n```python\n{ANALYSIS_CELL}```"
            else:
                text = decide(task, summary) if summary else _fallback(task)
        else:
            text = decide(task, analyse(task.series))
        return Completion(text=text, latency_s=time.perf_counter() - started)

    def close(self) -> None:
        pass


def _read_summary(messages: list[Message]) -> dict | None:
    for message in reversed(messages):
        if message.role == "user":
            found = re.search(rf"{SUMMARY_TAG} (\{{.*\}})", message.content)
            return json.loads(found.group(1)) if found else None
    return None


def _fallback(task: TaskInfo) -> str:
    """An answer in schema when the analysis produced nothing readable (e.g. the kernel failed)."""
    return decide(task, {n: {"max_z": 0.0, "start": 0, "end": 1, "shift_sigma": 1.0, "kind": lb.LEVEL_SHIFT} for n in task.channel_names})


class TrivialCodePolicy:
    """`scripted/trivial-code`: writes `1+1` every turn until the budget ends. It measures harness overhead."""

    def __init__(self) -> None:
        self.name = "scripted/trivial-code"

    def generate(self, messages: list[Message], *, max_tokens=None, temperature=None, task: TaskInfo | None = None) -> Completion:
        text = "```python\n1+1\n```" if task is None or task.code_execution else "{}"
        return Completion(text=text)

    def close(self) -> None:
        pass


POLICIES = {"zscore": ZScorePolicy, "trivial-code": TrivialCodePolicy}


def build(name: str):
    if name not in POLICIES:
        raise LookupError(name)
    return POLICIES[name]()
