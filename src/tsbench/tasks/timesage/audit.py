"""The temporal-isolation audit (paper Step 7, Table 8, and the isolation gate of Table 9).

For every period instance it proves from the files the jail would receive that:
- only timeseries.csv, answer_schema.json and gt_source/* are visible (no truth or evidence file);
- the table is strictly ascending, no row is dated after the cutoff, the last row is the period;
- no visible release is the target period's or later, and no visible file holds the target
  release's text or the truth;
and, per scenario, that the truth conforms to the schema, table-grounded truths are reproduced by
their rules from the visible table, the tier's coverage rule holds and the periods are complete.
`generate` refuses to write a set with any failure; warnings (a field constant over every
period) are reported but do not block.
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
from tsbench.tasks.timesage.taxonomy import coverage_problems, rule_allowed

CHECKS = (
    "visible_files",
    "table_order",
    "no_future_rows",
    "no_target_release",
    "truth_outside_jail",
    "schema",
    "rule_reproduces",
    "coverage",
    "completeness",
    "rule_matches_tag",
)


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
        for spec in scenario.fields:
            values = {dumps(p.truth.get(spec.name)) for p in periods}
            if spec.in_accuracy and len(periods) > 1 and len(values) == 1:
                report.warnings.append(f"{scenario.id}: {spec.name} has the same truth in every period")
    return report


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
            )
        )
    return out
