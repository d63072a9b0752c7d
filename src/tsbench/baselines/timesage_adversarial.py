"""The adversarial suite judge/rules is held to (spec "The offline judge"; issue 38): every answer policy
crossed with every report writer (timesage_writers.py), scored per tier and axis, against bounds that
follow from what each policy reads.

Answer policies:
- schema_guess: a value of each field's type chosen without data (the first option, 0, empty);
- random_guess: a value of each field's type drawn at random (seeded by the period);
- base_rate: each field's most common truth in the set's other scenarios (a prior; it reads no period);
- prior: each field's most common truth in another set (the same scenario kind's field, else the
  question kind's), a most-common-answer prior learned where the truth was seen;
- copy_last: what the last visible release stated (it reads the prior releases, not this period's data);
- copy_jitter: copy_last with each figure moved by up to 2 %; copy_trend: copy_last with each figure
  moved on by its last change (the release before the last);
- naive_rule: each question's stated rule on the period's visible files (timesage_naive.py; the first
  policy that reads them);
- truth: the withheld truth (a REFERENCE: it sees more than any agent).

Bounds, on every tier and overall: a policy that reads nothing of this period, with any writer that
does not read it either, <= 20 (base_rate and prior, which earn their guessing accuracy, <= 25); every
copy_last variant with any writer <= 50; naive_rule with every honest writer above all of those; truth
with every honest writer >= 90 (>= 95 plain); truth with a report that conveys nothing right <= 50. The
writers that restate the current table (cells, dump) are scored and shown, bounded only by the naive
rule above them.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsbench.baselines.timesage_calibration import _last_release, _prior_statement, guess, periods_of, release_facts
from tsbench.baselines.timesage_naive import naive_answer
from tsbench.baselines.timesage_writers import HONEST, WRITERS, write
from tsbench.tasks.timesage.contract import validate
from tsbench.tasks.timesage.judge_cache import Asker
from tsbench.tasks.timesage.judge_rules import RulesJudge
from tsbench.tasks.timesage.scoring import score_message
from tsbench.tasks.timesage.subjects import lexicon

POLICIES = tuple("schema_guess random_guess base_rate prior copy_last copy_jitter copy_trend naive_rule truth".split())
BLIND = ("schema_guess", "random_guess", "base_rate", "prior")
PRIORS = ("base_rate", "prior")  # most-common-answer priors: they earn their guessing accuracy
COPYING = ("copy_last", "copy_jitter", "copy_trend")
READS_TABLE = ("cells", "dump")  # writers that restate the current table
NOTHING_RIGHT = ("spray", "hedge", "dump", "previous", "wrong", "every", "contradict", "empty")
WHERE = ("overall", "easy", "medium", "hard")
AXES = ("accuracy", "coverage", "faithfulness", "quality", "overall")


def base_rates(pairs: list[tuple[dict, dict]]) -> dict[str, Counter]:
    """scenario -> field -> Counter of its truths (as JSON), for the leave-one-scenario-out prior."""
    table: dict[str, dict[str, Counter]] = {}
    for gold, _ in pairs:
        fields = table.setdefault(gold["scenario"], {})
        for name, value in gold["truth"].items():
            fields.setdefault(name, Counter())[json.dumps(value, sort_keys=True)] += 1
    return table


def _kind(scenario: str) -> str:
    """A scenario's kind across sets ("energy-crude-stocks-weekly-02" -> "energy-crude-stocks")."""
    return re.sub(r"-(?:daily|weekly|monthly|quarterly|irregular)?-?\d+$", "", scenario)


def prior_table(pairs: list[tuple[dict, dict]]) -> dict[tuple[str, ...], dict[str, Counter]]:
    """(scenario kind, field) and (question kind,) -> scenario -> Counter of the truths seen, for `prior`."""
    table: dict[tuple[str, ...], dict[str, Counter]] = {}
    for gold, _ in pairs:
        for spec in gold["fields"]:
            value = gold["truth"].get(spec["name"])
            if value is not None:
                text = json.dumps(value, sort_keys=True)
                for key in ((_kind(gold["scenario"]), spec["name"]), (spec["tag"],)):
                    table.setdefault(key, {}).setdefault(gold["scenario"], Counter())[text] += 1
    return table


def _first_valid(counts: Counter, spec: dict) -> Any:
    for text, _ in counts.most_common():
        value = json.loads(text)
        if value is not None and not validate(value, spec.get("schema") or {}):
            return value
    return None


def _most_common(rates: dict, gold: dict, spec: dict) -> Any:
    counts: Counter = Counter()
    for scenario, fields in rates.items():
        if scenario != gold["scenario"]:
            counts.update(fields.get(spec["name"], Counter()))
    found = _first_valid(counts, spec)
    return guess(spec.get("schema") or {}) if found is None else found


def _prior(table: dict, gold: dict, spec: dict, exclude: str | None) -> Any:
    """The most common valid truth of the field's scenario kind, else of its question kind (`exclude`: the
    scenario left out, when the prior is learned on the set it is scored on)."""
    for key in ((_kind(gold["scenario"]), spec["name"]), (spec["tag"],)):
        counts: Counter = Counter()
        for scenario, seen in table.get(key, {}).items():
            if scenario != exclude:
                counts.update(seen)
        found = _first_valid(counts, spec)
        if found is not None:
            return found
    return guess(spec.get("schema") or {})


def random_value(schema: dict, rng: random.Random) -> Any:
    """A value of the schema's type drawn at random: an option, a number in [-50, 50], a subset, a flip."""
    kind, items = schema.get("type"), schema.get("items") or {}
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if kind == "array":
        key = next(iter(items.get("properties") or {}), None)
        options = items.get("enum") or ((items.get("properties") or {}).get(key) or {}).get("enum") or []
        chosen = rng.sample(options, rng.randint(0, min(3, len(options))))
        return [{key: c} for c in chosen] if items.get("type") == "object" else chosen
    if kind == "object":
        return {k: random_value(v, rng) for k, v in (schema.get("properties") or {}).items()}
    if kind == "integer":
        return rng.randint(0, 10)
    if kind == "number":
        return round(rng.uniform(-50, 50), 1)
    return rng.random() < 0.5 if kind == "boolean" else ""


def _moved(value: Any, by: Any) -> Any:
    """`value` with each figure moved: by a factor (a float `by`), or on by its change since `by` (a value)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, dict):
        return {k: _moved(v, by.get(k) if isinstance(by, dict) else by) for k, v in value.items()}
    if not isinstance(value, (int, float)):
        return value
    if isinstance(by, float):
        return round(value * by, 2) if isinstance(value, float) else value
    if isinstance(by, (int, float)) and not isinstance(by, bool):
        return round(2 * value - by, 2) if isinstance(value, float) else 2 * value - by
    return value


def answer(policy: str, gold: dict, period: dict, rates: dict) -> tuple[dict | None, dict]:
    """(answer, what the policy read) for one period; None: the policy does not apply (nothing to copy).
    `rates`: what the policies learn beside the period (suite_rates)."""
    fields = gold["fields"]
    if policy == "schema_guess":
        return {f["name"]: guess(f.get("schema") or {}) for f in fields}, {}
    if policy == "random_guess":
        rng = random.Random(f"{gold['scenario']}/{gold['period_index']}")
        return {f["name"]: random_value(f.get("schema") or {}, rng) for f in fields}, {}
    if policy == "base_rate":
        return {f["name"]: _most_common(rates["base"], gold, f) for f in fields}, {}
    if policy == "prior":
        exclude = None if rates.get("prior_elsewhere") else gold["scenario"]
        return {f["name"]: _prior(rates["prior"], gold, f, exclude) for f in fields}, {}
    last = release_facts(_last_release(gold, period))
    read_last = {"prior_driver": last.get("driver"), "release": last}
    previous = gold.get("prior_truth") or period.get("previous_truth")
    if policy in COPYING:
        if previous is None:
            return None, read_last
        if policy == "copy_jitter":
            rng = random.Random(f"{gold['scenario']}/{gold['period_index']}")
            return {k: _moved(v, 1 + rng.uniform(-0.02, 0.02)) for k, v in previous.items()}, read_last
        if policy == "copy_trend":
            before = (rates.get("before") or {}).get((gold["scenario"], gold["period_index"])) or {}
            return {k: _moved(v, before.get(k)) for k, v in previous.items()}, read_last
        return dict(previous), read_last
    if policy == "naive_rule":
        found = naive_answer(gold, period)
        return {f["name"]: found.get(f["name"], guess(f.get("schema") or {})) for f in fields}, {
            "prior_driver": last.get("driver"),
            "release": {},
        }
    if policy == "truth":
        return dict(gold["truth"]), {
            "prior_driver": _prior_statement(gold),
            "release": release_facts(period.get("target_doc", "")),
        }
    raise ValueError(f"unknown policy {policy!r}")


def suite_rates(pairs: list[tuple[dict, dict]], elsewhere: list[tuple[dict, dict]] | None = None) -> dict:
    """What the policies learn beside the period: "base" (base_rates of the set), "prior" (prior_table of
    `elsewhere`, another set, else of this one, its own scenario left out) and "before" ((scenario, period
    index) -> what the release before the last stated, for copy_trend)."""
    return {
        "base": base_rates(pairs),
        "prior": prior_table(elsewhere or pairs),
        "prior_elsewhere": bool(elsewhere),
        "before": {(g["scenario"], g["period_index"] + 1): g.get("prior_truth") for g, _ in pairs},
    }


@dataclass
class Bound:
    name: str
    op: str  # "<=" | ">=" | ">"
    value: float | None  # None: above the best of `over` (the naive rule's bound)


def bound_of(policy: str, writer: str) -> Bound | None:
    if policy in BLIND and writer not in READS_TABLE:
        return Bound("reads nothing of the period", "<=", 25.0 if policy in PRIORS else 20.0)
    if policy in COPYING:
        return Bound("copies the last release", "<=", 50.0)
    if policy == "naive_rule" and writer in HONEST:
        return Bound("naive rule above every blind and copying policy", ">", None)
    if policy == "truth" and writer in HONEST:
        return Bound("truth, honest report", ">=", 95.0 if writer == "plain" else 90.0)
    if policy == "truth" and writer in NOTHING_RIGHT:
        return Bound("truth, report states nothing right", "<=", 50.0)
    return None


def make_judge(name: str) -> Any:
    """A suite judge by name: "rules" (judge/rules) or "standin" (a model judge answering off format)."""
    from tsbench.baselines.timesage_standin import OffFormatJudge

    return {"rules": RulesJudge, "standin": OffFormatJudge}[name]()


def run_suite(
    path: str | Path,
    policies: Iterable[str] = POLICIES,
    writers: Iterable[str] = WRITERS,
    limit_scenarios: int | None = None,
    prior_path: str | Path | None = None,
    judge: str = "rules",
) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """{(policy, writer): {where: {axis: mean}}} over a periods.parquet, with `judge` (make_judge). `prior_path`:
    the set the `prior` policy learns on (another seed; without one it learns on this set's other
    scenarios). `judge_errors` is the share of rows with an axis scored as a judge error."""
    scorer = make_judge(judge)
    pairs = periods_of(path, limit_scenarios)
    rates = suite_rates(pairs, periods_of(prior_path) if prior_path else None)
    writers = tuple(writers)
    sums: dict[tuple[str, str], dict[str, dict[str, list[float]]]] = {}
    lexicons = [lexicon(gold) for gold, _ in pairs]
    for policy in policies:
        for (gold, period), lex in zip(pairs, lexicons):
            values, reads = answer(policy, gold, period, rates)
            if values is None:
                continue
            for writer in writers:
                report = write(writer, gold, period, values, reads)
                message = json.dumps({"answer": values, "report": report})
                scored = score_message(gold, message, Asker(scorer), lex)
                cell = sums.setdefault((policy, writer), {})
                for where in ("overall", gold["tier"]):
                    for axis in AXES:
                        value = scored.metrics.get(axis)
                        cell.setdefault(where, {}).setdefault(axis, []).append(0.0 if value is None else value)
                    errored = 100.0 * bool(scored.metrics.get("judge_error_axes"))
                    cell[where].setdefault("judge_errors", []).append(errored)
    return {
        key: {w: {a: sum(v) / len(v) for a, v in axes.items()} for w, axes in cell.items()}
        for key, cell in sums.items()
    }


def margins(result: dict) -> dict[tuple[str, str, str], tuple[Bound, float, float]]:
    """(policy, writer, where) -> (bound, its value, margin: positive inside); the naive rule's bound
    is the best blind or copying score on that tier."""
    bounded = [cell for (p, w), cell in result.items() if p in COPYING or (p in BLIND and w not in READS_TABLE)]
    ceiling = {where: max((c[where]["overall"] for c in bounded if where in c), default=0.0) for where in WHERE}
    out = {}
    for (policy, writer), cell in result.items():
        bound = bound_of(policy, writer)
        if bound is None:
            continue
        for where, axes in cell.items():
            score = axes["overall"]
            limit = ceiling[where] if bound.value is None else bound.value
            room = limit - score if bound.op == "<=" else score - limit
            out[(policy, writer, where)] = (bound, limit, room)
    return out


def violations(result: dict) -> list[str]:
    broken = []
    for (policy, writer, where), (bound, limit, room) in sorted(margins(result).items()):
        if room < 0 or (bound.op == ">" and room == 0):
            broken.append(
                f"{policy} x {writer} {where}: {result[(policy, writer)][where]['overall']:.1f} ({bound.op} {limit:.1f})"
            )
    return broken


def suite_table(result: dict) -> str:
    """One line per policy x writer x tier: the four axes, the overall, its bound and the margin."""
    rows = margins(result)
    names = "".join(f"{a[:5]:>7}" for a in AXES)
    lines = [f"  {'policy':12} {'writer':9} {'tier':7}{names}  {'bound':>8} {'margin':>7}"]
    for (policy, writer), cell in result.items():
        for where in WHERE:
            if where not in cell:
                continue
            axes = cell[where]
            found = rows.get((policy, writer, where))
            shown = f"  {found[0].op:>2} {found[1]:5.1f} {found[2]:+7.1f}" if found else f"  {'-':>8} {'':>7}"
            lines.append(f"  {policy:12} {writer:9} {where:7}" + "".join(f"{axes[a]:7.1f}" for a in AXES) + shown)
    broken = violations(result)
    lines.append(
        f"  {len(result)} combinations; "
        + ("every bound holds" if not broken else "OUT OF BOUNDS: " + "; ".join(broken))
    )
    return "\n".join(lines)


def suite_matrix(results: dict[tuple[int, str], dict]) -> str:
    """A markdown table, writer x seed x judge: the truth's overall and four axes with that writer (the share
    of rows with a judge error beside it), and the best blind and copying policy's overall with it, each
    against its bound. `results`: (seed, judge) -> run_suite's result."""
    head = (
        "| writer | seed | judge | truth overall | accuracy | coverage | faithfulness | quality | judge errors "
        "| bound | best blind (bound) | best copy (<= 50) |"
    )
    lines = [head, "|" + "---|" * 12]
    writers = sorted({w for result in results.values() for _, w in result}, key=list(WRITERS).index)
    for writer in writers:
        for (seed, judge), result in sorted(results.items()):
            truth = result.get(("truth", writer), {}).get("overall")
            if truth is None:
                continue
            bound = bound_of("truth", writer)
            blind = [(c["overall"]["overall"], p) for (p, w), c in result.items() if p in BLIND and w == writer]
            copy = [c["overall"]["overall"] for (p, w), c in result.items() if p in COPYING and w == writer]
            best_blind = max(blind, default=None)
            limit = bound_of(best_blind[1], writer) if best_blind else None
            shown = f"({limit.op} {limit.value:.0f})" if limit else "(-)"
            blind_text = "-" if best_blind is None else f"{best_blind[0]:.1f} {shown}"
            lines.append(
                f"| {writer} | {seed} | {judge} | {truth['overall']:.1f} | "
                + " | ".join(f"{truth[a]:.1f}" for a in ("accuracy", "coverage", "faithfulness", "quality"))
                + f" | {truth.get('judge_errors', 0.0):.1f} % | "
                + (f"{bound.op} {bound.value:.0f}" if bound and bound.value is not None else "-")
                + f" | {blind_text} | "
                + (f"{max(copy):.1f}" if copy else "-")
                + " |"
            )
    return "\n".join(lines)
