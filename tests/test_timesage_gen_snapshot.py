"""The snapshot converter: an instance folder in the authors' layout (the current and later
releases inside gt_source/, x-rule in the schema, gt_evidence.md, a contract with tags only)
becomes a `released` set that passes the audit and scores against the same truths."""

from __future__ import annotations

import json
import shutil

import pytest

from timesage_cases import host_schema
from tsbench.core.errors import UserError
from tsbench.tasks.timesage.audit import audit
from tsbench.tasks.timesage.contract import SCHEMA_FILE, SOURCE_DIR
from tsbench.tasks.timesage.generate import build_sets
from tsbench.tasks.timesage.sources.released import export_released
from tsbench.tasks.timesage.sources.synthetic import materialize, plan_set


def _authors_layout(sets, root):
    """Our export, rewritten the way the paper describes a snapshot instance."""
    export_released(sets, root)
    for scenario, periods in sets:
        folder = root / scenario.id
        contract = json.loads((folder / "scenario.json").read_text())
        (folder / "scenario.json").unlink()
        if scenario.tier == "easy":  # tags only: the converter takes each tag's Table 7 rule
            contract["tags"] = {f["name"]: f["tag"] for f in contract.pop("fields")}
        (folder / "contract.json").write_text(json.dumps(contract))
        labels = [p.label for p in periods]
        for i, period in enumerate(periods):
            instance = folder / period.label
            (instance / SCHEMA_FILE).write_text(json.dumps(host_schema(scenario)))  # rules inside
            for doc in (instance / "target").iterdir():
                shutil.move(doc, instance / SOURCE_DIR / doc.name)  # the current release sits with the others
            (instance / "target").rmdir()
            if i + 1 < len(labels):  # and a later one, as a careless export would leave it
                (instance / SOURCE_DIR / f"{labels[i + 1]}.md").write_text("from the future")
            lines = json.loads((instance / "context.json").read_text())
            (instance / "context.json").unlink()
            (instance / "gt_evidence.md").write_text("\n".join(lines) + "\n")


def test_a_snapshot_in_the_authors_layout_converts_to_a_clean_released_set(tmp_path):
    sets = [materialize(plan) for plan in plan_set(42, 2, 3)]  # an easy and a medium scenario
    _authors_layout(sets, tmp_path / "snapshot")
    back, config = build_sets({"source": "snapshot", "path": str(tmp_path / "snapshot")})
    assert config["source"] == "snapshot" and audit(back).ok
    for (scenario, periods), (again, periods_again) in zip(sets, back):
        assert again.id == scenario.id and [f.tag for f in again.fields] == [f.tag for f in scenario.fields]
        assert [f.rule for f in again.fields] == [f.rule for f in scenario.fields]
        assert [f.derive for f in again.fields] == [f.derive for f in scenario.fields]  # host side
        for period, other in zip(periods, periods_again):
            assert other.truth == period.truth and other.target_doc == period.target_doc
            assert other.prior_docs == period.prior_docs  # the current and later releases left the jail
            assert b"x-rule" not in other.files[SCHEMA_FILE]
            assert other.context == period.context
    with pytest.raises(UserError, match="needs --path"):
        build_sets({"source": "snapshot"})
    with pytest.raises(UserError, match="no <scenario>"):
        build_sets({"source": "snapshot", "path": str(tmp_path)})
