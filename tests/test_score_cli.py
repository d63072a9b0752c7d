"""`tsbench score` on careless input: object responses, foreign ids, repeated ids, bad bytes, --out a folder."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest


def run_in_process(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    from tsbench.cli import main

    monkeypatch.setattr(sys, "argv", ["tsbench", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    return exited.value.code or 0, captured.out, captured.err


@pytest.fixture(scope="module")
def precise(small_data):
    from tsbench.tasks.anomalyxl.rows import read_index

    path = small_data / "test-precise.parquet"
    return path, read_index(path)


def _score(monkeypatch, capsys, data, answers, *extra):
    return run_in_process(monkeypatch, capsys, "score", "--data", str(data), "--responses", str(answers), *extra)


def test_a_json_object_response_is_scored_as_the_answer(precise, tmp_path, monkeypatch, capsys):
    data, index = precise
    golds = {rid: json.loads(g) for rid, g in zip(index["id"], index["gold"])}
    rid = next(r for r, c in zip(index["id"], index["category"]) if c == "localize" and golds[r].get("present"))
    gold = golds[rid]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        json.dumps({"id": rid, "response": {"present": True, "start": gold["start"], "end": gold["end"]}}) + "\n"
    )
    out = tmp_path / "scores.parquet"
    code, _, err = _score(monkeypatch, capsys, data, answers, "--out", str(out))
    assert code == 0, err
    row = pd.read_parquet(out).set_index("id").loc[rid]
    assert row["valid"] and row["score"] == 1.0


def test_no_shared_id_is_one_line_and_exit_2(precise, tmp_path, monkeypatch, capsys):
    data, _ = precise
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"id": "other-file-row-1", "response": "x"}) + "\n")
    code, _, err = _score(monkeypatch, capsys, data, answers)
    assert code == 2 and "none of the 1 response ids" in err and len(err.strip().splitlines()) == 1


def test_a_repeated_id_is_reported(precise, tmp_path, monkeypatch, capsys):
    data, index = precise
    rid = index["id"][0]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("\n".join(json.dumps({"id": rid, "response": r}) for r in ("a", "b")) + "\n")
    code, _, err = _score(monkeypatch, capsys, data, answers)
    assert code == 2 and f"{rid!r} repeats line 1" in err and ":2:" in err and "Traceback" not in err


def test_non_utf8_responses_and_out_as_a_folder_are_one_line(precise, tmp_path, monkeypatch, capsys):
    data, index = precise
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes(json.dumps({"id": index["id"][0], "response": "caf"}).encode()[:-2] + b'\xe9\xff"}\n')
    code, _, err = _score(monkeypatch, capsys, data, answers)
    assert code == 2 and "not UTF-8" in err and len(err.strip().splitlines()) == 1
    answers.write_text(json.dumps({"id": index["id"][0], "response": "x"}) + "\n")
    folder = tmp_path / "a_folder"
    folder.mkdir()
    code, _, err = _score(monkeypatch, capsys, data, answers, "--out", str(folder))
    assert code == 2 and "is a directory" in err and len(err.strip().splitlines()) == 1
