"""The results journal and run summary: torn lines, stray lines, inspect's --fail-on-error rule."""

from __future__ import annotations

import json

import pandas as pd

from tsbench import results as schema
from tsbench.results.journal import Journal, read_journal_report
from tsbench.results.records import new_record
from tsbench.results.summary import fails, summarize


def record(sample_id: str, score: float | None = 1.0, error: str | None = None) -> dict:
    rec = new_record(
        sample_id=sample_id,
        epoch=0,
        family="anomalyxl",
        columns={"category": "localize"},
        model="m",
        harness="h",
        depth=0,
        gold={"present": False},
    )
    rec.update(score=None if error else score, error_type=error, valid=error is None)
    return rec


def test_a_torn_last_line_is_skipped_and_the_next_append_starts_a_fresh_line(tmp_path):
    journal = Journal(tmp_path)
    journal.append(record("a"))
    journal.append(record("b"))
    journal.close()
    path = tmp_path / schema.JOURNAL
    text = path.read_text()
    path.write_text(text[: len(text) - 40])  # killed mid-write: b's line is cut short, no newline
    journal = Journal(tmp_path)
    journal.append(record("c"))
    journal.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["id"] == "c"  # c is not glued onto b's fragment
    read = read_journal_report(tmp_path)
    assert [r["id"] for r in read.records] == ["a", "c"]
    assert read.bad_lines == [2] and "skipped 1 unreadable journal line(s) (line 2)" in read.note()


def test_valid_json_that_is_not_a_record_is_reported_not_a_crash(tmp_path):
    path = tmp_path / schema.JOURNAL
    good = json.dumps(record("a"), default=str)
    stray = [
        "[1, 2]",
        '"text"',
        '{"id": "x", "epoch": 0}',
        '{"id": "y", "epoch": true, "category": "c", "score": 1, "error_type": null}',
        '{"hello": 1}',
    ]
    path.write_text("\n".join([good, *stray, ""]))
    read = read_journal_report(tmp_path)
    assert [r["id"] for r in read.records] == ["a"] and read.bad_lines == [2, 3, 4, 5, 6]
    assert schema.load_samples(tmp_path)["id"].tolist() == ["a"]  # the table readers agree


def test_a_record_with_wrongly_typed_values_is_reported_not_a_crash(tmp_path):
    path = tmp_path / schema.JOURNAL
    wrong = [
        {**record("s"), "score": "abc"},
        {**record("t"), "turns": "many"},
        {**record("u"), "valid": "yes"},
        {**record("v"), "metrics": [1, 2]},
    ]
    path.write_text("\n".join(json.dumps(r, default=str) for r in [record("a"), *wrong]) + "\n")
    read = read_journal_report(tmp_path)
    assert [r["id"] for r in read.records] == ["a"] and read.bad_lines == [2, 3, 4, 5]
    assert schema.load_samples(tmp_path)["id"].tolist() == ["a"]


def test_a_later_line_supersedes_an_error_row(tmp_path):
    journal = Journal(tmp_path)
    journal.append(record("a", error="server"))
    journal.append(record("b"))
    journal.append(record("a", score=0.5))
    journal.close()
    read = read_journal_report(tmp_path)
    assert [(r["id"], r["score"], r["error_type"]) for r in read.records] == [("a", 0.5, None), ("b", 1.0, None)]
    assert read.note() is None


def test_fail_on_error_follows_inspect():
    assert not fails(0, 10, 0.0)
    assert fails(1, 10, 0.0)  # default: any error fails
    assert not fails(1, 10, 0.1) and fails(2, 10, 0.1)  # below 1: a share of rows
    assert not fails(3, 10, 3) and fails(4, 10, 3)  # from 1: a count


def test_summary_keeps_errors_apart_from_scores():
    rows = pd.DataFrame([record("a", 1.0), record("b", 0.0), record("c", error="server")])
    summary = summarize(rows)["overall"]
    assert summary["rows"] == 3 and summary["n"] == 2 and summary["errors"] == 1
    assert summary["mean"] == 0.5 and summary["small_n"]
    all_failed = summarize(pd.DataFrame([record("a", error="timeout")]))["overall"]
    assert all_failed["mean"] is None and all_failed["ci95"] is None and all_failed["errors"] == 1
