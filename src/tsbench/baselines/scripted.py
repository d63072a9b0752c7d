"""`scripted/zscore`: a deterministic, non-LLM reference policy that plays every harness.

Under a code harness (rlm) it writes real Python: `analyse` below is shipped into the kernel as
source, run there over `series`, and its printed summary is read back on the next turn to answer
in the task's schema. Under single-pass-text it runs the same `analyse` on the values written in
its prompt (strided as the prompt says), so it sees exactly what a model sees; it cannot read
images. It is the harness's model-free test driver and a floor any LLM should beat.

`scripted/tools` (native function calling) and `scripted/tools-json` (the JSON text tool-call
protocol) play the TimeClaw tools harness the same way through typed tools: the first reply calls
`list_channels` and `robust_zscore_scan`, the next turns the scan's observation into an answer
with `decide`. Under any other harness they behave exactly like `scripted/zscore`.
"""

from __future__ import annotations

import inspect
import json
import re
import time

from tsbench.models.base import Agent, Completion, Message, TaskInfo, ToolCall
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.labels import magnitude_band, start_bin

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
        before = x[max(0, start - 256) : start]
        after = x[end : end + 256]
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
            kind = (
                "Change in Seasonality"
                if crossings > len(inside) / 8 and crossings < len(inside) / 2
                else "Change in Variance"
            )
        elif peaky:
            kind = "Transient Spike"
        else:
            kind = "Level Shift"
        out[name] = {
            "max_z": round(top, 3),
            "start": start,
            "end": end,
            "shift_sigma": round(abs(shift), 3),
            "kind": kind,
        }
    return out


ANALYSIS_CELL = inspect.getsource(analyse) + f"\nimport json\nprint('{SUMMARY_TAG}', json.dumps(analyse(series)))\n"


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


class ZScorePolicy(Agent):
    plays = ("rlm", "rlm-image", "single-pass-text")
    name = "scripted/zscore"

    def generate(
        self, messages: list[Message], *, max_tokens=None, temperature=None, task: TaskInfo | None = None
    ) -> Completion:
        started = time.perf_counter()
        if task is None:
            raise ValueError("scripted/zscore needs the task's TaskInfo (it is a reference policy, not a chat model)")
        if task.code_execution:
            summary = last_tagged(messages, SUMMARY_TAG)
            if summary is None and not any(m.role == "assistant" for m in messages):
                text = f"I will compute robust z-scores per channel.\n```python\n{ANALYSIS_CELL}```"
            else:
                text = decide(task, summary) if summary else _fallback(task)
        else:
            text = _answer_from_prompt(task, messages)
        return Completion(text=text, latency_s=time.perf_counter() - started)


_STRIDE = re.compile(r"only every (\d+)-th sample is shown")


def values_from_prompt(text: str, channel_names: list[str]) -> tuple[dict, int] | None:
    """The series as a single-pass-text prompt writes it ("name: v,v,...", every k-th sample)."""
    found = _STRIDE.search(text)
    stride = int(found.group(1)) if found else 1
    series = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(": ")
        if sep and name in channel_names and name not in series:
            try:
                series[name] = [float(v) for v in rest.split(",")]
            except ValueError:
                continue
    return (series, stride) if len(series) == len(channel_names) else None


def _answer_from_prompt(task: TaskInfo, messages: list[Message]) -> str:
    user = next((m.content for m in messages if m.role == "user"), "")
    parsed = values_from_prompt(user, task.channel_names)
    if parsed is None:
        raise ValueError("scripted/zscore found no series in its prompt (it plays rlm and single-pass-text only)")
    series, stride = parsed
    summary = analyse(series)
    for info in summary.values():  # back to original sample indices
        info["start"], info["end"] = info["start"] * stride, info["end"] * stride
    return decide(task, summary)


def last_tagged(messages: list[Message], tag: str) -> dict | None:
    """The JSON object printed after `tag` in the latest user message (the kernel's output), if any."""
    for message in reversed(messages):
        if message.role == "user":
            found = re.search(rf"{tag} (\{{.*\}})", message.content)
            return json.loads(found.group(1)) if found else None
    return None


def _quiet(task: TaskInfo) -> dict:
    """The summary of channels with no excursion: what `decide` gets when nothing readable came back."""
    return {
        n: {"max_z": 0.0, "start": 0, "end": 1, "shift_sigma": 1.0, "kind": lb.LEVEL_SHIFT} for n in task.channel_names
    }


def _fallback(task: TaskInfo) -> str:
    """An answer in schema when the analysis produced nothing readable (e.g. the kernel failed)."""
    return decide(task, _quiet(task))


class TrivialCodePolicy(Agent):
    """`scripted/trivial-code`: writes `1+1` every turn until the budget ends. It measures harness overhead."""

    plays = ("rlm", "rlm-image")
    name = "scripted/trivial-code"

    def generate(
        self, messages: list[Message], *, max_tokens=None, temperature=None, task: TaskInfo | None = None
    ) -> Completion:
        text = "```python\n1+1\n```" if task is None or task.code_execution else "{}"
        return Completion(text=text)


def kind_from_window(window: dict) -> str:
    """The anomaly kind `analyse` would name, from robust_zscore_scan's window shape features."""
    shift, step = abs(window.get("shift_sigma") or 0.0), abs(window.get("step_sigma") or 0.0)
    var_ratio, rate = window.get("var_ratio") or 0.0, window.get("crossing_rate") or 0.0
    if step > 0.6 * max(shift, 1e-9) and step > 1.0:
        return lb.TREND
    if var_ratio > 2.0 and shift < 0.5 * var_ratio:
        return lb.SEASONALITY if 1 / 8 < rate < 1 / 2 else lb.VARIANCE
    if window.get("end", 0) - window.get("start", 0) > 4 and (window.get("peak_ratio") or 0.0) > 1.5:
        return lb.TRANSIENT_SPIKE
    return lb.LEVEL_SHIFT


def summary_from_scan(task: TaskInfo, scan: dict) -> dict:
    """robust_zscore_scan's all-channel observation -> the per-channel summary `decide` takes."""
    summary = _quiet(task)
    for window in scan.get("scan", []):
        if window.get("channel") in summary:
            summary[window["channel"]] = {
                "max_z": window.get("max_z") or 0.0,
                "start": int(window.get("start", 0)),
                "end": int(window.get("end", 1)),
                "shift_sigma": abs(window.get("shift_sigma") or 0.0),
                "kind": kind_from_window(window),
            }
    return summary


TOOL_PLAN = (("list_channels", {}), ("robust_zscore_scan", {}))
_TOOL_RESULT = re.compile(r'<tool_result name="robust_zscore_scan"[^>]*>(.*?)</tool_result>', re.DOTALL)


def _read_scan(messages: list[Message]) -> dict | None:
    """The latest robust_zscore_scan observation, from a native "tool" message or a <tool_result> block."""
    for message in reversed(messages):
        texts = [message.content] if message.role == "tool" else _TOOL_RESULT.findall(message.content)
        for text in texts:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict) and "scan" in value:
                return value
    return None


class ToolsPolicy(Agent):
    """`scripted/tools`: plays the tools harness by native tool calls (`scripted/tools-json`: by the JSON
    text protocol); under any other harness it is `scripted/zscore`."""

    plays = ("tools", "tools-image", "rlm", "rlm-image", "single-pass-text")
    name = "scripted/tools"

    def __init__(self) -> None:
        self._zscore = ZScorePolicy()

    @classmethod
    def native_tools(cls) -> bool:
        return True

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens=None,
        temperature=None,
        task: TaskInfo | None = None,
        tools=None,
        tool_choice=None,
    ) -> Completion:
        started = time.perf_counter()
        if task is None or task.tool_calling is None:
            return self._zscore.generate(messages, max_tokens=max_tokens, temperature=temperature, task=task)
        scan = _read_scan(messages)
        first = not any(m.role == "assistant" for m in messages)
        if first and scan is None and tool_choice != "none":
            if task.tool_calling == "native":
                calls = [
                    ToolCall(f"call_{index}", name, json.dumps(args)) for index, (name, args) in enumerate(TOOL_PLAN)
                ]
                return Completion(text="", tool_calls=calls, latency_s=time.perf_counter() - started)
            text = "I will scan every channel for robust z-score excursions.\n" + "\n".join(
                f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>" for name, args in TOOL_PLAN
            )
            return Completion(text=text, latency_s=time.perf_counter() - started)
        text = decide(task, summary_from_scan(task, scan)) if scan else _fallback(task)
        return Completion(text=text, latency_s=time.perf_counter() - started)


class JsonToolsPolicy(ToolsPolicy):
    """`scripted/tools-json`: the tools policy without native function calling."""

    name = "scripted/tools-json"

    @classmethod
    def native_tools(cls) -> bool:
        return False
