"""TimeSage-EV calibration (spec: "Calibration", binding): four policies whose scores bound what the
instrument may give, each a function from one period to the final message a file agent would send.

- data_blind: never reads a file; ten bland sentences and a tail listing every label of the schema
  and the numbers 0-300; answer `{}`. Must score <= 20 overall and on every tier.
- copy_last: answers what the last release said (its stated values: gold["prior_truth"]) and writes
  them up with the truth policy's plain report (stale values, good writing). Must score <= 50.
  (`copy_last_text`, the release's own text as the report, scores lower: a milder check.)
- truth (REFERENCE: it sees the withheld truth, more than any model): the truth as the answer and a
  plain report stating each keypoint about its subject. Must score >= 95.
- scripted: the scripted/timesage rule executor (baselines/scripted_timesage.py), run on the
  period's visible files. Must stay below the paper's weakest model on every tier (PAPER_FLOOR).

`calibrate(periods.parquet)` scores all four with judge/rules and returns overall and per-tier means.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tsbench.baselines.scripted_timesage import scripted_message
from tsbench.tasks.timesage.clauses import phrase
from tsbench.tasks.timesage.contract import truth_text
from tsbench.tasks.timesage.judge_cache import Asker
from tsbench.tasks.timesage.judge_rules import RulesJudge
from tsbench.tasks.timesage.scoring import score_message
from tsbench.tasks.timesage.store import files_of, read_periods
from tsbench.tasks.timesage.subjects import enum_options

# The weakest model per tier in the paper's Table 12 (overall column): Devstral-2-123B on easy and
# medium, Gemma-4-31B on hard; and the weakest overall (Gemma-4-31B, 75.31).
PAPER_FLOOR = {"easy": 92.27, "medium": 71.57, "hard": 53.10, "overall": 75.31}
BOUNDS = {"data_blind": ("<=", 20.0), "copy_last": ("<=", 50.0), "truth": (">=", 95.0)}
POLICIES = ("data_blind", "copy_last", "truth", "scripted")

_BLAND = (  # ten bland sentences about no period in particular
    "This note reviews the latest release in its usual context. Conditions this period are consistent with "
    "the broader picture. Analysts continue to monitor the situation closely. Several factors shape the "
    "overall assessment. The evidence base is reviewed carefully each period. Movements should be read "
    "against longer-term patterns. Market participants will follow the next release with interest. The "
    "assessment balances recent developments and history. Uncertainty is a normal feature of this kind of "
    "analysis. Further detail will follow in subsequent releases."
)


def message(answer: Any, report: str) -> str:
    return json.dumps({"answer": answer, "report": report})


def all_labels(gold: dict) -> list[str]:
    return list(dict.fromkeys(label for f in gold["fields"] for label in enum_options(f["schema"])))


def spray(gold: dict) -> str:
    """Every label of the schema and the numbers 0-300."""
    return "Possible outcomes include " + ", ".join(all_labels(gold)) + "; values " + ", ".join(map(str, range(301)))


def data_blind(gold: dict, period: dict | None = None) -> str:
    """Bland prose plus every label and the numbers 0-300; nothing read from any file."""
    return message({}, f"It is now {gold['period_label']}. " + _BLAND + " " + spray(gold) + ".")


def guess(schema: dict) -> Any:
    """A value of the schema's type chosen without data: the first option, 0, an empty list."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "array":
        return []
    if kind == "object":
        return {k: guess(v) for k, v in schema.get("properties", {}).items()}
    if kind in ("number", "integer"):
        return 0
    return False if kind == "boolean" else ""


def data_blind_guessing(gold: dict, period: dict | None = None) -> str:
    """The data-blind report with a well-typed guessed answer instead of `{}` (a stricter check)."""
    sent = json.loads(data_blind(gold, period))
    return message({f["name"]: guess(f["schema"]) for f in gold["fields"]}, sent["report"])


def _value_text(field: dict, value: Any, unit: str) -> str:
    """A value as a plain writer puts it: objects as "key value" pairs, a change with its direction."""
    if isinstance(value, dict):
        parts = [f"{k} {v}{' %' if k in ('probability', 'share') else ''}" for k, v in value.items()]
        return ", ".join(parts)
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        # items paired with their evidence (E4 drivers, F1 risks): "name (reading)"
        return ", ".join(" ".join(_paired(item)) for item in value)
    text = truth_text(value) or "none"
    changes = field["tag"].startswith("B") and field["tag"] != "B4"  # change detection (B4 counts a run)
    if changes and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g} ({'it increased' if value > 0 else 'it decreased' if value < 0 else 'unchanged'})"
    return f"{text} {unit}".strip() if isinstance(value, (int, float)) and not isinstance(value, bool) else text


def _paired(item: dict) -> list[str]:
    texts = [str(v) for v in item.values() if v is not None]
    name = str(item.get("driver") or item.get("risk") or texts[0])
    return [name, *(f"({t})" for t in texts if t != name)]


def _unit(gold: dict) -> str:
    for signal in gold["quality"]["required"]:
        if signal.get("check", {}).get("kind") == "number_unit":
            return signal["check"]["units"][0]
    return ""


def plain_report(gold: dict, values: dict, prior: Any, release: dict[str, str] | None = None) -> str:
    """One sentence per keypoint stating its value about its subject, then the sources; the risk,
    the primary driver (when no sentence names one) and the outlook with its confidence a hard-tier
    note carries (`release`: what the release the policy reads states, `release_facts`)."""
    release = release or {}
    confidence, driver = release.get("confidence"), release.get("driver")
    unit = _unit(gold)
    lines = [f"Period {gold['period_label']}: analysis of this release."]
    by_field = {f["name"]: f for f in gold["fields"]}
    for kp in gold["keypoints"]:
        name = kp.get("field")
        if name is None:
            if prior is not None and gold.get("prior_docs"):
                lines.append(f"The previous release ({gold['prior_docs'][-1]}) named {truth_text(prior)} as a driver.")
            continue
        value = values.get(name)
        if value is None or name not in by_field:
            continue
        text = _value_text(by_field[name], value, unit if "value" in name else "")
        lines.append(f"The {phrase(name)} is {text}.")
    sources = "timeseries.csv" + (f" and the prior release {gold['prior_docs'][-1]}" if gold.get("prior_docs") else "")
    lines.append(f"Evidence: {sources}.")
    if gold["tier"] == "hard":
        if driver and not any(phrase(driver) in phrase(line) for line in lines):
            lines.append(f"The primary driver is {driver}.")
        lines.append("The main risk is that the drivers reverse (timeseries.csv), so uncertainty remains.")
        if confidence:
            direction = _direction(gold, values) or (f" ({release['direction']})" if "direction" in release else "")
            lines.append(f"The outlook{direction} is held with {confidence} % confidence.")
    return " ".join(lines)


def _direction(gold: dict, values: dict) -> str:
    """ " (<direction>)" from the outlook fields' values (F2 label, F3 direction), else ""."""
    for spec in gold["fields"]:
        value = values.get(spec["name"])
        if spec["tag"] == "F2" and isinstance(value, str):
            return f" ({phrase(value)})"
        if spec["tag"] == "F3" and isinstance(value, dict) and value.get("direction"):
            return f" ({phrase(str(value['direction']))})"
    return ""


def _prior_statement(gold: dict) -> Any:
    """What the previous release said, as its keypoint records it (readable in that release)."""
    return next((kp["truth"] for kp in gold["keypoints"] if kp.get("field") is None), None)


def release_facts(text: str) -> dict[str, str]:
    """What a release states of its outlook and drivers: "confidence" (the outlook's probability),
    "direction" (of the outlook) and "driver" (the primary one), where it states them."""
    patterns = {
        "confidence": r"(\d+(?:\.\d+)?) % probability",
        "direction": r"Outlook for the next period: ([\w-]+)",
        "driver": r"Primary driver: ([\w-]+)",
    }
    found = {key: re.search(pattern, text) for key, pattern in patterns.items()}
    return {key: match.group(1) for key, match in found.items() if match}


def truth(gold: dict, period: dict | None = None) -> str:
    """REFERENCE policy: it sees the withheld truth and the withheld release (more than a model can)."""
    report = plain_report(
        gold, gold["truth"], _prior_statement(gold), release_facts((period or {}).get("target_doc", ""))
    )
    return message(dict(gold["truth"]), report)


def _last_release(gold: dict, period: dict | None) -> str:
    docs, files = gold.get("prior_docs") or [], (period or {}).get("files") or {}
    return files[docs[-1]].decode("utf-8", "replace") if docs and docs[-1] in files else ""


def copy_last(gold: dict, period: dict | None = None) -> str | None:
    """What the last visible release said (gold["prior_truth"], else the previous period's truth;
    its outlook's confidence and primary driver) as this period's answer, written up by the same
    plain report as the truth: stale values, good writing. None when there is nothing to copy (the
    period is left out)."""
    previous = gold.get("prior_truth") or (period or {}).get("previous_truth")
    if previous is None:
        return None
    report = plain_report(gold, previous, _prior_statement(gold), release_facts(_last_release(gold, period)))
    return message(dict(previous), report)


def copy_last_text(gold: dict, period: dict | None = None) -> str | None:
    """The milder copier: the last release's values and its text verbatim as the report."""
    previous, text = gold.get("prior_truth") or (period or {}).get("previous_truth"), _last_release(gold, period)
    return None if previous is None or not text else message(dict(previous), text)


def scripted(gold: dict, period: dict | None = None) -> str:
    period = period or {}
    return scripted_message(period["files"], period["question"], period["meta"])


POLICY_FUNCTIONS: dict[str, Callable[[dict, dict | None], str | None]] = {
    "data_blind": data_blind,
    "data_blind_guessing": data_blind_guessing,
    "copy_last": copy_last,
    "copy_last_text": copy_last_text,
    "truth": truth,
    "scripted": scripted,
}


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value or "")


def periods_of(path: str | Path, limit_scenarios: int | None = None) -> list[tuple[dict, dict]]:
    """(gold, period) pairs of a periods.parquet in scenario order; `period` carries the visible
    files, the question, the meta and the previous period's truth of the same scenario."""
    frame = read_periods(path).sort_values(["scenario", "period_index"], kind="stable")
    scenarios = list(dict.fromkeys(frame["scenario"]))[:limit_scenarios]
    out, previous = [], {}
    for _, row in frame[frame["scenario"].isin(scenarios)].iterrows():
        gold = json.loads(row["gold"])
        info = {
            "files": files_of(row["files"]),
            "question": row["question"],
            "meta": json.loads(row["meta"]),
            "previous_truth": previous.get(row["scenario"]),
            "target_doc": _text(row["target_doc"]),  # withheld: only the truth policy reads it
        }
        previous[row["scenario"]] = gold["truth"]
        out.append((gold, info))
    return out


def calibrate(path: str | Path, policies: tuple[str, ...] = POLICIES) -> dict[str, dict[str, float]]:
    """{policy: {"overall": mean overall, "easy": ..., "medium": ..., "hard": ...}} under judge/rules."""
    pairs = periods_of(path)
    result = {}
    for name in policies:
        by_tier: dict[str, list[float]] = {}
        for gold, period in pairs:
            sent = POLICY_FUNCTIONS[name](gold, period)
            if sent is None:  # the policy does not apply to this period
                continue
            scored = score_message(gold, sent, Asker(RulesJudge()))
            by_tier.setdefault(gold["tier"], []).append(100.0 * scored.score)
        every = [v for values in by_tier.values() for v in values]
        result[name] = {"overall": sum(every) / len(every), **{t: sum(v) / len(v) for t, v in by_tier.items()}}
    return result


TIERS = ("overall", "easy", "medium", "hard")


def margin(name: str, where: str, value: float) -> float | None:
    """How far inside its bound a policy's score is (negative: outside); None where no bound
    applies (the spec bounds copy-last overall only; its tiers are shown for reading)."""
    if name == "scripted":
        return PAPER_FLOOR[where] - value
    if name not in BOUNDS or (name == "copy_last" and where != "overall"):
        return None
    op, bound = BOUNDS[name]
    return bound - value if op == "<=" else value - bound


def calibration_table(result: dict[str, dict[str, float]]) -> str:
    """The four policies side by side per tier, each score with its margin to the bound (+ inside)."""
    bounds = {**{k: f"{op} {b:g}" for k, (op, b) in BOUNDS.items()}, "scripted": "< paper"}
    bounds["copy_last"] += " overall"
    lines = [f"  {'where':8} " + " ".join(f"{p:>16}" for p in POLICIES) + f" {'paper floor':>12}"]
    lines.append(f"  {'bound':8} " + " ".join(f"{bounds[p]:>16}" for p in POLICIES))
    for where in TIERS:
        cells = []
        for name in POLICIES:
            value = result.get(name, {}).get(where)
            room = None if value is None else margin(name, where, value)
            text = "-" if value is None else f"{value:.1f}" + ("" if room is None else f" ({room:+.1f})")
            cells.append(f"{text:>16}")
        lines.append(f"  {where:8} " + " ".join(cells) + f" {PAPER_FLOOR[where]:12.2f}")
    broken = violations(result)
    lines.append("  calibrated (margins in brackets)" if not broken else "  OUT OF BOUNDS: " + "; ".join(broken))
    return "\n".join(lines)


def violations(result: dict[str, dict[str, float]]) -> list[str]:
    """Each calibration bound the result breaks, in words (empty: calibrated)."""
    broken = []
    for name, (op, bound) in BOUNDS.items():
        # the spec bounds copy-last overall
        for where in ("overall",) if name == "copy_last" else tuple(result.get(name, {})):
            value = result.get(name, {}).get(where)
            if value is None:
                continue
            if (op == "<=" and value > bound) or (op == ">=" and value < bound):
                broken.append(f"{name} {where} {value:.1f} (bound {op} {bound:g})")
    for where, value in result.get("scripted", {}).items():
        if value >= PAPER_FLOOR[where]:
            broken.append(f"scripted {where} {value:.1f} (paper's weakest model {PAPER_FLOOR[where]:g})")
    return broken
