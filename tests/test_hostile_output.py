"""A hostile model's text in every output people read: a poisoned run (its answer and its kernel
output carry formulas, HTML, ESC/OSC sequences, OSC-8 links and a fake "score: 1.000" line) shown
by `tsbench show`, put on the leaderboard (md, csv) and exported as CSV."""

from __future__ import annotations

import csv
import json
import re

import pytest

from tsbench.core.sanitize import csv_cell, markdown_text, terminal_text

ROW = "test-localize-1024-00000"
ESC, BEL, CSI = "\x1b", "\x07", "\x9b"
OSC8 = f"{ESC}]8;;http://evil.example/{BEL}click here{ESC}]8;;{BEL}"
# The final answer: what a spreadsheet, a page and a terminal would each obey.
ANSWER = (
    f'=HYPERLINK("http://evil.example","open") <script>alert(1)</script> <img src=x onerror=alert(2)> '
    f"{ESC}[2J{ESC}]0;pwned title{BEL}{OSC8}\rscore: 1.000"
)
# The kernel prints the same kinds of thing (escapes written in the code, real bytes in the output).
CODE = r"print('\x1b[2J\x1b]0;kernel title\x07\x1b]8;;http://evil.example/\x07link\x1b]8;;\x07\rscore: 1.000\x9b31m')"
RUN_NAME = "@SUM(1+1)"  # a run dir name a spreadsheet would run


def _controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F})


@pytest.fixture(scope="module")
def poisoned_run(small_data, tmp_path_factory):
    import os

    from tsbench.core.config import build
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval
    from tsbench.testing.fake_openai_server import FakeOpenAIServer

    out = tmp_path_factory.mktemp("poisoned") / RUN_NAME
    os.environ.setdefault("OPENAI_API_KEY", "test-key")
    with FakeOpenAIServer([f"ok:```python\n{CODE}\n```", f"ok:{ANSWER}"], default=f"ok:{ANSWER}") as server:
        run_eval(
            build(
                EvalConfig,
                {
                    "model": "openai/fake-model",
                    "base_url": server.base_url,
                    "harness": "rlm",
                    "data": [str(small_data)],
                    "sample_ids": [ROW],
                    "concurrency": 1,
                    "out": str(out),
                },
            )
        )
    transcript = (out / "samples.jsonl").read_text()
    assert "kernel title" in transcript and "onerror" in transcript  # the poison really is in the run
    return out


def test_show_sends_no_control_character_to_the_terminal(poisoned_run, cli):
    code, out, err = cli("show", str(poisoned_run), "--id", ROW)
    assert code == 0, err
    assert _controls(out) == [], _controls(out)
    assert "click here" in out and "link" in out  # a link's text stays, as plain text
    assert "pwned title" not in out  # a title sequence goes whole...
    assert out.count("kernel title") == out.count("\\x1b]0;kernel title")  # ...only the code's own text stays
    assert "score:  0.000" in out  # the real result
    assert not any(re.match(r"^\W*score: 1\.000", line) for line in out.splitlines())  # no faked line of its own
    code, out, _ = cli("show", str(poisoned_run))
    assert code == 0 and _controls(out) == []


def _cells(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return [cell for row in csv.reader(fh) for cell in row]


def _formula(cell: str) -> bool:
    if not cell.startswith(("=", "+", "-", "@", "\t", "\r")):
        return False
    try:
        float(cell)
        return False
    except ValueError:
        return True


def test_leaderboard_md_and_csvs_carry_no_markup_and_no_formula(poisoned_run, tmp_path):
    from tsbench.leaderboard import build_leaderboard

    board = tmp_path / "board"
    build_leaderboard([poisoned_run], board, n_boot=50)
    failures = _cells(board / "failures.csv")
    assert any("HYPERLINK" in c for c in failures)  # the answer is the failure's example...
    for name in ("failures.csv", "leaderboard.csv", "costs.csv", "by_length.csv"):
        bad = [c for c in _cells(board / name) if _formula(c)]
        assert bad == [], (name, bad)  # ...but no cell is a formula
    assert "'=HYPERLINK(" in (board / "failures.csv").read_text()
    md = (board / "leaderboard.md").read_text()
    assert "HYPERLINK" in md and "&lt;script&gt;" in md
    for raw in ("<script", "<img", "onerror=alert(2)>"):
        assert raw not in md
    assert _controls(md) == []
    assert "<ins>" in md or "**" in md or "Table 1" in md  # our own markup still renders
    html = (board / "leaderboard.html").read_text()
    assert "<script>alert" not in html and "<img src=x" not in html


def test_export_csv_neutralises_formula_cells(poisoned_run, tmp_path, cli):
    target = tmp_path / "long.csv"
    code, _, err = cli("export", str(poisoned_run), "--format", "csv", "--out", str(target))
    assert code == 0, err
    cells = _cells(target)
    assert f"'{RUN_NAME}" in cells and RUN_NAME not in cells
    assert [c for c in cells if _formula(c)] == []


@pytest.mark.parametrize("text", [ANSWER, CODE.encode().decode("unicode_escape"), f"a{CSI}2Jb", "x\x00y\x7fz\x85"])
def test_terminal_text_keeps_text_newlines_and_tabs_only(text):
    clean = terminal_text(text + "\nline two\tcol")
    assert _controls(clean) == [] and clean.endswith("\nline two\tcol")


def test_csv_cell_and_markdown_text():
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("+cmd") == "'+cmd" and csv_cell("@A1") == "'@A1"
    assert csv_cell("\t=x") == "'\t=x" and csv_cell("\r=x") == "'=x" and csv_cell("a\x1b[2Jb") == "ab"
    assert csv_cell("-0.25") == "-0.25" and csv_cell("+3") == "+3" and csv_cell(-1.5) == -1.5
    assert csv_cell("- 1") == "'- 1" and csv_cell("plain") == "plain"
    assert markdown_text("<b>x</b> | y & z") == "&lt;b&gt;x&lt;/b&gt; \\| y &amp; z"
    assert json.dumps(markdown_text(f"a{ESC}[31mb")) == '"ab"'
