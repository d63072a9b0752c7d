"""Nothing a model sends can stop the journal: a reply holding a lone UTF-16 surrogate ("\\ud800", valid
JSON) killed the whole eval in the journal writer (UnicodeEncodeError, rc 1): at concurrency 3, none of 6
rows journaled, and every resume met the same reply. Text is stored as it came where it can be, and made
valid where it cannot, with the row saying so (attributes["text_made_valid"])."""

from __future__ import annotations

import json
import os

from tsbench.core.config import build
from tsbench.core.unicode_text import ALTERED_ATTRIBUTE, valid_text
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.results import load_samples, read_journal
from tsbench.testing.fake_openai_server import FakeOpenAIServer

REPLY = 'thinking \ud800 and \udfff then NUL \x00 {"answer": "Yes"} \U0001f600 é'


def test_valid_text_keeps_what_it_can():
    assert valid_text("plain é \U0001f600 \x00") == ("plain é \U0001f600 \x00", 0)
    assert valid_text("a\ud800b\udc00") == ("a\ufffdb\ufffd", 2)
    assert valid_text("\ud83d\ude00") == ("\U0001f600", 2)  # a pair split in two code points: joined
    value, altered = valid_text({"k\ud800": ["x\udfff", 1, None, {"y": "\ud800"}]})
    assert value == {"k\ufffd": ["x\ufffd", 1, None, {"y": "\ufffd"}]} and altered == 3


def test_a_lone_surrogate_in_replies_is_journaled_and_resume_calls_no_model(small_data, tmp_path):
    os.environ.setdefault("OPENAI_API_KEY", "test-key")
    out = tmp_path / "run"
    cfg = {
        "model": "openai/fake-model",
        "harness": "single-pass-text",
        "data": [str(small_data)],
        "regime": "coarse",
        "limit": 6,
        "concurrency": 3,
        "out": str(out),
    }
    with FakeOpenAIServer(default=f"ok:{REPLY}") as server:
        cfg["base_url"] = server.base_url
        run_eval(build(EvalConfig, cfg))
        assert server.request_count == 6
        records = read_journal(out)
        assert len(records) == 6 and all(r["error_type"] is None for r in records), [r["error"] for r in records]
        for record in records:
            assert record["final_message"].startswith("thinking \ufffd and \ufffd then NUL \x00 {")  # NUL kept
            assert record["final_message"].endswith("\U0001f600 é")
            assert int(record["attributes"][ALTERED_ATTRIBUTE]) >= 2
        (out / "samples.jsonl").read_bytes().decode("utf-8")  # strictly valid UTF-8
        assert len(load_samples(out)) == 6
        assert json.loads((out / "run.json").read_text())["complete"] is True
        server.default = "500"  # resume: every row is done, so no model call at all
        run_eval(build(EvalConfig, cfg))
        assert server.request_count == 6
    assert len(read_journal(out)) == 6


def test_the_journal_itself_stores_any_row(tmp_path):
    """A row from any source (a local model, a harness) with text that has no UTF-8 form."""
    from tsbench.results.journal import Journal
    from tsbench.results.schema import COLUMN_NAMES

    record = {name: None for name in COLUMN_NAMES} | {"id": "a", "epoch": 0, "category": "c"}
    record |= {"final_message": "x\ud800", "attributes": {"k": "v"}, "transcript": json.dumps(["\udfff"])}
    journal = Journal(tmp_path)
    journal.append(record)
    journal.append(record | {"id": "b", "final_message": "fine", "attributes": {}, "transcript": "[]"})
    journal.close()
    rows = read_journal(tmp_path)
    assert [r["id"] for r in rows] == ["a", "b"]
    assert rows[0]["final_message"] == "x\ufffd" and rows[0]["attributes"] == {"k": "v", ALTERED_ATTRIBUTE: "1"}
    assert json.loads(rows[0]["transcript"]) == ["\udfff"]  # a JSON escape is valid text: stored as it came
    assert ALTERED_ATTRIBUTE not in rows[1]["attributes"]
