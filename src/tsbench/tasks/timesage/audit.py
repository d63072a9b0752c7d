"""The temporal-isolation audit (paper Step 7, Table 8, and the isolation gate of Table 9).

For every period instance it proves from the files the jail would receive that:
- only timeseries.csv, answer_schema.json and gt_source/* are visible (no truth or evidence file);
- the table is strictly ascending, no row is dated after the cutoff, the last row is the period;
- no visible release is the target period's or later, and no visible file holds the target
  release's text or the truth;
and, per scenario, that the truth conforms to the schema, table-grounded truths are reproduced by
their rules from the visible table, the tier's coverage rule holds and the periods are complete.
and that the scenario is not degenerate: copying the previous release (each field answered with
the previous release's truth, the first period's included, scored by the field's own rule) is
right at most COPY_LAST_MAX of the time on average over the scenario's fields, whatever its
length (from MIN_TRANSITIONS releases on); with at least MIN_PERIODS periods, also no scored
field has one answer in every period and none is copied right more than FIELD_COPY_LAST_MAX.
`generate` refuses to write a set with any failure.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tsbench.tasks.timesage.contract import SCHEMA_FILE, SOURCE_DIR, TABLE_FILE, Period, Scenario, dumps, validate
from tsbench.tasks.timesage.derive import derive, rows_needed
from tsbench.tasks.timesage.rules import field_score
from tsbench.tasks.timesage.taxonomy import coverage_problems, rule_allowed

CHECKS = tuple(
    "visible_files table_order no_future_rows no_target_release truth_outside_jail schema rule_reproduces coverage "
    "completeness rule_matches_tag degenerate".split()
)

# Degeneracy thresholds (issue #23). A copy-the-last-release policy right on more than 40 % of a
# scenario's field-periods measures persistence, not analysis: its report is well written (quality
# ~95, writing only, paper A.4.2), so persistence is what keeps copy-last under 50 overall (spec:
# Calibration). The mean applies to every scenario whatever its length, from MIN_TRANSITIONS
# releases on (a short set is scored as it is, so it is judged as it is; before, sets under 12
# periods were never checked and the 6 x 4 calibration set's copy-last was 52.4, now 49.7). The
# per-field rules (a field copied right over 90 % of the time is a near-constant, one answer
# throughout is a constant) need MIN_PERIODS periods: over a few periods a steady answer is an
# ordinary draw. 35 % would take seed 42 (60 x 24) from 53.6 to 51.8 and 30 % is out of reach of
# redraws (11 of 60 plans fail all 24), so the bound needs less persistent worlds, not a lower line.
COPY_LAST_MAX = 0.4  # refused above, any source (synthetic worlds are drawn to COPY_LAST_TARGET)
FIELD_COPY_LAST_MAX = 0.9
MIN_PERIODS = 12
MIN_TRANSITIONS = 3


@dataclass
class AuditReport:
    instances: int = 0
    scenarios: int = 0
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (instance or scenario, check, detail)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def fail(self, where: str, check: str, detail: str) -> None:
        self.failures.append((where, check, detail))

    def summary(self) -> dict[str, Any]:
        by_check = {check: sum(1 for _, c, _ in self.failures if c == check) for check in CHECKS}
        return {
            "ok": self.ok,
            "instances": self.instances,
            "scenarios": self.scenarios,
            "failures": len(self.failures),
            "failures_by_check": by_check,
            "warnings": len(self.warnings),
            "first_failures": [f"{w}: {c}: {d}" for w, c, d in self.failures[:10]],
        }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _stem(name: str) -> str:
    base = name.split("/")[-1]
    return base.rsplit(".", 1)[0] if "." in base else base


def audit_period(scenario: Scenario, period: Period, report: AuditReport) -> None:
    where = period.id
    files = period.files
    extra = [n for n in files if n not in (TABLE_FILE, SCHEMA_FILE) and not n.startswith(SOURCE_DIR + "/")]
    if extra:
        report.fail(where, "visible_files", f"unexpected visible file(s) {extra[:3]}")
    if TABLE_FILE not in files:
        report.fail(where, "visible_files", f"no {TABLE_FILE}")
        return
    try:
        table = pd.read_csv(io.BytesIO(files[TABLE_FILE]), dtype={"date": str})
        dates = table["date"].astype(str).tolist()
    except Exception as exc:  # a table that does not parse fails the audit, whatever the reason
        report.fail(where, "table_order", f"{TABLE_FILE} does not parse: {exc}")
        return
    if any(b <= a for a, b in zip(dates, dates[1:])):
        report.fail(where, "table_order", "dates are not strictly ascending")
    late = [d for d in dates if d > period.cutoff]
    if late:
        report.fail(where, "no_future_rows", f"{len(late)} row(s) after the cutoff {period.cutoff}, first {late[0]}")
    if not dates or dates[-1] != period.label:
        report.fail(
            where, "no_future_rows", f"last row {dates[-1] if dates else None} is not the period {period.label}"
        )
    if period.target_name in files:
        report.fail(where, "no_target_release", f"the target release {period.target_name} is visible")
    for name in files:
        if name.startswith(SOURCE_DIR + "/") and _stem(name) >= period.label:
            report.fail(where, "no_target_release", f"{name} is not from before {period.label}")
    target = period.target_doc.strip()
    if target and any(target == body.strip() or (len(target) >= 200 and target in body) for body in files.values()):
        report.fail(where, "no_target_release", "a visible file holds the target release's text")
    truth_json = dumps(period.truth)
    truth_pretty = json.dumps(period.truth, sort_keys=True)
    for name, body in files.items():
        text = body.decode("utf-8", errors="replace")
        if truth_json in text or truth_pretty in text:
            report.fail(where, "truth_outside_jail", f"{name} holds the truth")
    schema = scenario.answer_schema()
    for spec in scenario.fields:
        if not spec.in_accuracy:
            schema["properties"][spec.name] = {}  # judged fields carry no truth
        elif period.truth.get(spec.name) is None:
            schema["properties"][spec.name] = {}  # "not applicable this period"
    for problem in validate(period.truth, schema):
        report.fail(where, "schema", problem)
    for spec in scenario.fields:
        if spec.derive is None or not spec.in_accuracy:
            continue
        if len(table) < rows_needed(spec.derive):
            report.fail(where, "rule_reproduces", f"{spec.name}: too few rows for its rule")
            continue
        recomputed = derive(table, spec.derive)
        if not _same(recomputed, period.truth.get(spec.name)):
            report.fail(
                where,
                "rule_reproduces",
                f"{spec.name}: rule gives {recomputed!r}, truth is {period.truth.get(spec.name)!r}",
            )


def audit(sets: Iterable[tuple[Scenario, list[Period]]]) -> AuditReport:
    report = AuditReport()
    for scenario, periods in sets:
        report.scenarios += 1
        for problem in coverage_problems(scenario.tier, scenario.tags):
            report.fail(scenario.id, "coverage", problem)
        for spec in scenario.fields:  # Table 7: which scoring rules a question's intent allows
            if not rule_allowed(spec.tag, spec.rule):
                report.fail(
                    scenario.id, "rule_matches_tag", f"{spec.name}: tag {spec.tag} is not scored by rule {spec.rule!r}"
                )
        indexes = [p.index for p in periods]
        if indexes != list(range(1, len(periods) + 1)):
            report.fail(scenario.id, "completeness", f"period indexes {indexes[:5]}... are not 1..{len(periods)}")
        for period in periods:
            report.instances += 1
            audit_period(scenario, period, report)
        for problem in degeneracy_problems(scenario, periods):
            report.fail(scenario.id, "degenerate", problem)
    return report


def _copy_pairs(periods: list[Period]) -> list[tuple[dict[str, Any], Period]]:
    """(what the last release stated, the period) for every period that has a last release: the
    first period's is its prior_truth, when the source kept it."""
    pairs = [(prev.truth, cur) for prev, cur in zip(periods, periods[1:])]
    if periods and periods[0].prior_truth is not None:
        pairs.insert(0, (periods[0].prior_truth, periods[0]))
    return pairs


def copy_last_rates(scenario: Scenario, periods: list[Period]) -> dict[str, float]:
    """Per scored field: how often the previous release's truth, scored by the field's rule, is
    right for this period (judged fields, which need a judge, are left out)."""
    rates = {}
    pairs = _copy_pairs(periods)
    for spec in scenario.fields:
        if not spec.in_accuracy or spec.rule == "judge":
            continue
        scores = [field_score(spec, prev.get(spec.name), cur.truth.get(spec.name)) for prev, cur in pairs]
        scores = [s for s in scores if s is not None]
        if scores:
            rates[spec.name] = sum(scores) / len(scores)
    return rates


def degeneracy_problems(scenario: Scenario, periods: list[Period], copy_limit: float = COPY_LAST_MAX) -> list[str]:
    """Why a scenario's truths do not measure anything (empty when they do); `copy_limit`: the
    average copy-last rate allowed (a generator may draw its worlds to a stricter one)."""
    problems = []
    if len(_copy_pairs(periods)) < MIN_TRANSITIONS:
        return problems  # too short to judge
    rates = copy_last_rates(scenario, periods)
    if len(periods) >= MIN_PERIODS:
        for spec in scenario.fields:
            values = {dumps(p.truth.get(spec.name)) for p in periods}
            if spec.in_accuracy and len(values) == 1:
                problems.append(f"{spec.name} has the same answer in all {len(periods)} periods")
        for name, rate in rates.items():
            if rate > FIELD_COPY_LAST_MAX:
                problems.append(f"copying the last release is right {100 * rate:.0f} % of the time on {name}")
    if rates and sum(rates.values()) / len(rates) > copy_limit:
        mean = 100 * sum(rates.values()) / len(rates)
        problems.append(f"copying the last release is right {mean:.0f} % of the time (limit {100 * copy_limit:.0f} %)")
    return problems


def periods_from_frame(frame: pd.DataFrame) -> dict[str, list[Period]]:
    """periods.parquet rows back into Period objects, grouped by scenario, in period order."""
    out: dict[str, list[Period]] = {}
    for row in frame.sort_values(["scenario", "period_index"]).itertuples(index=False):
        gold = json.loads(row.gold)
        truths = {kp["id"]: kp["truth"] for kp in gold["keypoints"]}
        out.setdefault(row.scenario, []).append(
            Period(
                scenario=row.scenario,
                index=int(row.period_index),
                label=row.period_label,
                cutoff=row.cutoff,
                files=dict(row.files) if row.files is not None else {},
                truth=json.loads(row.truth),
                keypoint_truths=truths,
                context=json.loads(row.context),
                target_name=row.target_name,
                target_doc=bytes(row.target_doc or b""),
                prior_truth=gold.get("prior_truth"),
            )
        )
    return out
