"""Model and run names are made safe once, at the edge (issue 44): a 4,000-character model name ended
eval in a traceback (file name too long), and newline/ESC in one broke the board's SVG figures (not
XML) and reached its Markdown and HTML."""

from __future__ import annotations

import os
import xml.dom.minidom

from tsbench.core.sanitize import NAME_CHARS, display_name, file_name_part
from tsbench.testing.fake_openai_server import FakeOpenAIServer

NAME = "evil\nname\x1b[2J\x1b]0;title\x07" + "m" * 4000


def test_display_name_and_file_name_part():
    shown = display_name(NAME + "\ud800")
    assert len(shown) <= NAME_CHARS and shown.startswith("evil name")
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or "\ud800" <= c <= "\udfff" for c in shown)
    assert display_name(NAME) != shown  # two long names stay apart
    assert display_name("gpt-4o") == "gpt-4o"
    part = file_name_part(NAME + "\ud800")
    assert len(part) <= 80 and "/" not in part and "\n" not in part and "\x1b" not in part
    assert file_name_part("../..") == "_" and file_name_part("Qwen/Qwen3:4b") == "Qwen_Qwen3_4b"


def test_a_hostile_model_name_runs_and_boards_cleanly(cli, small_data, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(default='ok:{"answer": "Yes"}', model_ids=[NAME]) as server:
        code, out, err = cli("eval", "--model", f"openai/{NAME}", "--base-url", server.base_url,
                             "--harness", "single-pass-text", "--data", small_data, "--regime", "coarse",
                             "--categories", "presence", "--limit", "1")  # fmt: skip
    assert code == 0, err
    assert "\x1b" not in out + err
    (run,) = (tmp_path / "results").iterdir()
    assert len(run.name) < 200 and "\n" not in run.name and "\x1b" not in run.name
    code, out, err = cli("leaderboard", run, "--out", tmp_path / "board")
    assert code == 0, err
    svgs = list((tmp_path / "board").glob("*.svg"))
    assert svgs
    for svg in svgs:
        xml.dom.minidom.parse(str(svg))  # well-formed XML
    for page in ("leaderboard.md", "leaderboard.html"):
        text = (tmp_path / "board" / page).read_text(encoding="utf-8")
        assert "evil name" in text
        assert not [c for c in text if ord(c) < 32 and c not in "\n\t"], page
    assert all(c == "\n" or c == "\t" or ord(c) >= 32 for c in out + err)
    assert os.path.isdir(run)
