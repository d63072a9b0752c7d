"""TimeSage-EV sets: deterministic generation, the default plan's coverage, the audit (and that it
catches planted leaks), and the replay and released sources."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

from timesage_cases import kind_tags
from tsbench.core.errors import UserError
from tsbench.tasks.timesage import generate as generate_module
from tsbench.tasks.timesage.audit import audit, periods_from_frame
from tsbench.tasks.timesage.contract import SCHEMA_FILE, TABLE_FILE, dumps
from tsbench.tasks.timesage.generate import generate_from_options
from tsbench.tasks.timesage.sources.released import export_released, read_released
from tsbench.tasks.timesage.sources.replay import SPECS, build_scenario
from tsbench.tasks.timesage.sources.synthetic import materialize, plan_set
from tsbench.tasks.timesage.store import PERIODS, SCENARIOS, read_periods, read_scenarios
from tsbench.tasks.timesage.taxonomy import CADENCES, DOMAINS, coverage_problems


@pytest.fixture(scope="module")
def small_sets():
    return [materialize(plan) for plan in plan_set(42, 3, 3)]


def test_default_plan_covers_tiers_domains_cadences_and_families():
    plans = plan_set(42)
    assert len(plans) == 60 and all(p.n_periods == 24 for p in plans)
    assert Counter(p.tier for p in plans) == {"easy": 20, "medium": 20, "hard": 20}
    assert Counter(p.domain for p in plans) == {d: 10 for d in DOMAINS}
    assert set(p.cadence for p in plans) == set(CADENCES)
    assert len({p.id for p in plans}) == 60
    assert plan_set(42, 3) == plans[:3]  # a smaller set is a prefix of the larger one
    assert plan_set(7) != plans
    assert {p.tier for p in plans[:3]} == {"easy", "medium", "hard"}
    families = set()
    for plan in plans:
        tags = [kind_tags()[kind] for kind in plan.kinds]
        assert not coverage_problems(plan.tier, tags), plan.id
        families |= {tag[0] for tag in tags if tag[0] in "ABCDEF"}
    assert families == set("ABCDEF")
    for plan in plans[:6]:  # the built contracts carry the planned tags
        scenario, periods = materialize(dataclasses.replace(plan, n_periods=1))
        assert scenario.tags == [kind_tags()[kind] for kind in plan.kinds] and len(periods) == 1


def test_generation_is_deterministic_bytes(tmp_path):
    options = {"seed": 42, "scenarios": 3, "periods": 3}
    first, _ = generate_from_options(dict(options), tmp_path / "a")
    second, _ = generate_from_options(dict(options), tmp_path / "b")
    for name in (SCENARIOS, PERIODS):
        assert (first.parent / name).read_bytes() == (second.parent / name).read_bytes(), name
    other, _ = generate_from_options({**options, "seed": 43}, tmp_path / "c")
    assert (other.parent / PERIODS).read_bytes() != (first.parent / PERIODS).read_bytes()
    manifest = json.loads(first.read_text())
    assert manifest["family"] == "timesage" and manifest["audit"]["ok"] and manifest["files"][PERIODS]["rows"] == 9
    frame = read_periods(first.parent / PERIODS)
    assert list(frame.columns)[:5] == ["id", "scenario", "period_index", "period_label", "cutoff"]
    scenarios = {s.id: s for s in read_scenarios(first.parent / SCENARIOS)}
    back = periods_from_frame(frame)
    assert audit((scenarios[sid], back[sid]) for sid in scenarios).ok  # what was written re-audits clean


def test_periods_are_cut_at_their_cutoff(small_sets):
    scenario, periods = small_sets[0]
    for period in periods:
        rows = period.files[TABLE_FILE].decode().strip().splitlines()
        assert rows[-1].split(",")[0] == period.label
        assert period.target_name not in period.files
        assert all(name.split("/")[-1] < f"{period.label}.md" for name in period.prior_docs)
        assert json.loads(period.files[SCHEMA_FILE])["required"] == scenario.required_keys
    # the evidence only grows: X<=t_k within X<=t_k+1, and R<t_k plus R_t_k within R<t_k+1
    first, second = periods[0], periods[1]
    assert second.files[TABLE_FILE].startswith(first.files[TABLE_FILE])
    assert set(first.prior_docs) | {first.target_name} == set(second.prior_docs)


def test_audit_passes_clean_sets(small_sets):
    report = audit(small_sets)
    assert report.ok, report.failures[:3]
    assert report.instances == 9 and report.scenarios == 3


def _planted(small_sets, change, which=1):
    scenario, periods = small_sets[which]
    period = periods[1]
    planted = dataclasses.replace(period, files=dict(period.files), truth=dict(period.truth))
    change(planted)
    return [(scenario, [periods[0], planted, *periods[2:]])]


def _checks(report) -> set[str]:
    return {check for _, check, _ in report.failures}


def test_audit_catches_a_row_after_the_cutoff(small_sets):
    def leak(p):
        p.files[TABLE_FILE] = p.files[TABLE_FILE] + b"2099-01,1,2,3,4,5,6,7,8\n"

    assert "no_future_rows" in _checks(audit(_planted(small_sets, leak)))


def test_audit_catches_the_target_release_in_the_jail(small_sets):
    def leak(p):
        p.files[p.target_name] = p.target_doc

    assert "no_target_release" in _checks(audit(_planted(small_sets, leak)))

    def renamed(p):  # the same text under an older name
        p.files["gt_source/1999-01-01.md"] = p.target_doc

    assert "no_target_release" in _checks(audit(_planted(small_sets, renamed)))


def test_audit_catches_the_truth_in_the_jail(small_sets):
    def leak(p):
        p.files["gt_source/1999-01-01.md"] = dumps(p.truth).encode()

    assert _checks(audit(_planted(small_sets, leak))) == {"truth_outside_jail"}

    def truth_file(p):
        p.files["ground_truth.json"] = b"{}"

    assert "visible_files" in _checks(audit(_planted(small_sets, truth_file)))


def test_audit_catches_a_truth_its_rule_does_not_reproduce(small_sets):
    scenario = small_sets[0][0]  # easy: table-derived fields (medium and hard truths come from releases)
    derived = next(f.name for f in scenario.fields if f.derive is not None)

    def wrong(p):
        p.truth[derived] = "not what the rule says"

    assert "rule_reproduces" in _checks(audit(_planted(small_sets, wrong, which=0)))


def test_audit_catches_a_rule_its_tag_does_not_allow(small_sets):
    scenario, periods = small_sets[1]
    numeric = next(f for f in scenario.fields if f.rule == "numeric")
    relabelled = dataclasses.replace(numeric, rule="label")  # a number scored as a label: Table 7 says no
    fields = [relabelled if f is numeric else f for f in scenario.fields]
    report = audit([(dataclasses.replace(scenario, fields=fields), periods)])
    assert "rule_matches_tag" in _checks(report)
    assert any(numeric.name in detail for _, check, detail in report.failures if check == "rule_matches_tag")


def test_generate_refuses_a_failing_set(small_sets, tmp_path, monkeypatch):
    def leak(p):
        p.files[p.target_name] = p.target_doc

    planted = _planted(small_sets, leak)
    monkeypatch.setattr(
        generate_module, "build_sets", lambda options, progress=None: (planted, {"seed": 42, "source": "synthetic"})
    )
    with pytest.raises(UserError, match="audit failed"):
        generate_from_options({"seed": 42}, tmp_path)
    assert not (tmp_path / "seed42").exists()


def test_replay_series_build_and_audit():
    spec = next(s for s in SPECS if s.dataset == "macrodata" and s.tier == "hard")
    scenario, periods = build_scenario(spec, 4)
    assert audit([(scenario, periods)]).ok
    assert scenario.source == "replay" and len(periods) == 4
    assert periods[-1].label == "2009-Q3" and periods[-1].truth["primary_driver"] == "realcons"
    assert periods[-1].truth["yoy_comparison"] == {"reference": "2008-Q3", "direction": "down"}
    assert "not an institutional release" in periods[-1].target_doc.decode()


def test_released_layout_round_trips(small_sets, tmp_path):
    export_released(small_sets, tmp_path / "released")
    back = read_released(tmp_path / "released")
    assert audit(back).ok
    for (scenario, periods), (again, periods_again) in zip(small_sets, back):
        assert again.source == "released"
        assert dataclasses.replace(again, source=scenario.source).to_dict() == scenario.to_dict()
        assert periods_again == periods
    with pytest.raises(UserError, match="scenario.json"):
        read_released(tmp_path)
