"""The naive rule of the TimeSage-EV adversarial suite: each question's stated rule applied to the
period's visible files, the simplest honest reading, no judgement.

- medium (the issuer's change, composition and event analysis): the brief's methodology, literally:
  the adjusted figure is the table value minus the adjustment the last release announced; changes,
  trends, runs, records and ranks compare it with the adjusted figures the releases published; the
  deviation is against the reference the last release declared; contributions use the brief's
  weights; an event a release announced for this period is named by its type, else a robust z-score
  over the stated threshold is 'unannounced'. `read_docs=False` is the table-only executor (the
  thresholds on the raw table, no adjustment, reference, weights or announcements).
- hard: the events as medium reads them; the cause and the drivers' readings from the table; the
  stakeholders and the conditional each driver's move got in the prior releases; the comparison
  with a year earlier by the brief's flat band; the rest (primary driver, outlook, guidance, risks)
  as scripted/timesage's executor has them.
- easy: scripted/timesage's executor (the band rule with its persistence).
"""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd

from tsbench.baselines.scripted_timesage import run_analysis
from tsbench.tasks.timesage.cadence import PERIODS_PER_YEAR
from tsbench.tasks.timesage.contract import SOURCE_DIR, TABLE_FILE
from tsbench.tasks.timesage.derive import direction_of, robust_z

_NUM = r"([+-]?\d+(?:\.\d+)?)"


def _num(pattern: str, text: str) -> float:
    return float(re.search(pattern.replace("NUM", _NUM), text).group(1))


def medium_answers(
    files: dict[str, bytes], background: str, columns: dict[str, str], label: str, read_docs: bool
) -> dict:
    """Every medium (issuer-view) field from the visible files (see the module docstring);
    `columns`: the table's columns and meanings, date first or left out."""
    table = pd.read_csv(io.BytesIO(files[TABLE_FILE]), dtype={"date": str})
    header = list(table.columns)
    value, components = header[1], header[5:9]
    decimals = len(files[TABLE_FILE].decode().splitlines()[-1].split(",")[1].split(".")[-1])
    x = table[value].to_numpy(dtype=float)
    flat = _num(r"smaller than NUM", background)
    docs = [files[name].decode() for name in sorted(n for n in files if n.startswith(SOURCE_DIR + "/"))]
    names = [columns[c].split(": ", 1)[1] for c in components]
    if read_docs:
        adjusted = [_num(r"Adjusted \S+: NUM", d) for d in docs]
        now = round(x[-1] - _num(r"Adjustment announced for the next period: NUM", docs[-1]), decimals)
        reference = _num(r"Reference level for the next period: NUM", docs[-1])
        weights = [_num(re.escape(n) + " NUM", background.split("these weights:")[1]) for n in names]
        runs = [re.search(r"\), (up|down|flat) by", d) for d in docs]
        directions = [m.group(1) if m else None for m in runs]
        announced = [m.group(1) for d in docs for m in re.finditer(rf"a (\w+) event is expected in {label}\.", d)]
    else:
        adjusted, now, reference = list(x[:-1]), x[-1], float(np.mean(x[-14:-1]))
        weights, directions, announced = [1.0] * 4, None, []

    now_dir = direction_of(round(now - adjusted[-1], decimals), flat)
    if directions is None:
        directions = [direction_of(b - a, flat) for a, b in zip(x[:-2], x[1:-1])]
    run = 1
    for d in reversed(directions):
        if d != now_dir:
            break
        run += 1
    window = np.array([*adjusted[-6:], now])
    contrib = {n: w * float(table[c].iloc[-1]) for n, w, c in zip(names, weights, components)}
    total = sum(contrib.values())
    ordered = sorted(contrib, key=lambda n: (-contrib[n], n))
    baseline = int(_num(r"against the (\d+) changes", background))
    event_z = abs(robust_z(np.diff(x), len(x) - 2, baseline))
    event = announced[0] if announced else "unannounced" if event_z > 3.5 else "none"
    z = {c: robust_z(np.diff(table[c].to_numpy(dtype=float)), len(table) - 2, baseline) for c in header[1:]}
    threshold = _num(r"robust z-score above NUM in absolute value", background)
    flagged = [c for c, v in z.items() if abs(v) > threshold]
    if read_docs and event not in ("unannounced", "none"):
        flagged = [c for c in flagged if c != value]
    return {
        "change": round(now - adjusted[-1], decimals),
        "change_direction": now_dir,
        "trend_3": round(now - adjusted[-3], decimals),
        "run_length": run,
        "vs_baseline": round(now - reference, decimals),
        "is_record": bool(now >= window.max()),
        "rank": int((window[:-1] > now).sum()) + 1,
        "top_components": sorted(ordered[:2]),
        "dominant_component": ordered[0],
        "component_shares": {n: round(100 * v / total, 1) for n, v in contrib.items()},
        "major_components": sorted(n for n in names if 100 * contrib[n] / total >= 25.0),
        "event_type": event,
        "flagged_series": sorted(flagged),
    }


_STAKEHOLDER = re.compile(r"(\w+) \(through (\w+) (rising|falling)\)")
_CONDITIONAL = re.compile(r"if (\w+) stays \w+ its normal \((up|down)\), \S+ is expected to go (up|down)")


def hard_answers(files: dict[str, bytes], answer: dict, background: str, cadence: str) -> dict:
    """The hard fields a reader can work out from the visible files: the cause and drivers with
    their readings from the table, the stakeholders and the conditional the prior releases tie to
    each driver's move, the comparison with a year earlier (the brief's flat band), on top of
    `answer` (the scripted executor's primary and secondary drivers)."""
    table = pd.read_csv(io.BytesIO(files[TABLE_FILE]), dtype={"date": str})
    docs = "\n".join(files[name].decode() for name in sorted(n for n in files if n.startswith(SOURCE_DIR + "/")))
    primary = answer.get("primary_driver")
    if primary not in table.columns:
        drivers = list(table.columns[2:5])
        scale = {d: float(np.std(np.diff(table[d].to_numpy(dtype=float)))) or 1.0 for d in drivers}
        primary = max(drivers, key=lambda d: abs(float(table[d].iloc[-1] - table[d].iloc[-2])) / scale[d])
    delta = {c: float(table[c].iloc[-1] - table[c].iloc[-2]) for c in table.columns[1:]}
    rising = delta[primary] > 0
    named = [primary, *[d for d in answer.get("secondary_drivers") or [] if d in delta and d != primary]]
    groups = {(d, move == "rising"): g for g, d, move in _STAKEHOLDER.findall(docs)}
    then = {(d, move): result for d, move, result in _CONDITIONAL.findall(docs)}
    ppy = PERIODS_PER_YEAR.get(cadence, 12)
    x = table[table.columns[1]].to_numpy(dtype=float)
    flat = _num(r"smaller than NUM", background)
    change = x[-1] - x[-1 - ppy] if len(x) > ppy else 0.0
    return {
        "primary_driver": primary,
        "cause": f"{primary} {'rose' if rising else 'fell'}",
        "drivers_evidence": [
            {"driver": d, "evidence": f"{d} at {table[d].iloc[-1]:.2f} ({delta[d]:+.2f})"} for d in named
        ],
        "stakeholders": [groups[(primary, rising)]] if (primary, rising) in groups else [],
        "conditional_outlook": {
            "if_driver": primary,
            "if_direction": "up" if rising else "down",
            "then_direction": then.get((primary, "up" if rising else "down"), "up" if rising else "down"),
        },
        "yoy_comparison": {
            "reference": str(table["date"].iloc[-1 - ppy]) if len(x) > ppy else "",
            "direction": direction_of(change, flat),
        },
    }


def naive_answer(gold: dict, period: dict) -> dict:
    """The naive rule's answer to one period (gold: the scenario contract and its context lines;
    period: the visible files)."""
    result = run_analysis(period["files"])
    answer = dict(result["answer"]) if result else {}
    if gold["tier"] == "easy":
        return answer
    background = next(line for line in gold["context"] if line.startswith("Scenario background: "))
    columns = next(line for line in gold["context"] if line.startswith("Table columns: "))
    meanings = dict(part.split(" = ", 1) for part in columns[len("Table columns: ") :].split("; "))
    found: dict = {}
    try:  # a layout these rules do not know leaves the executor's answers
        found = medium_answers(period["files"], background, meanings, gold["period_label"], read_docs=True)
        if gold["tier"] == "hard":
            found.update(
                hard_answers(period["files"], answer, background, (period.get("meta") or {}).get("cadence", ""))
            )
    except (AttributeError, IndexError, KeyError, ValueError):
        pass
    answer.update({name: found[name] for name in gold["truth"] if name in found})
    return answer
