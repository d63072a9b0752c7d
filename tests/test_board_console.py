"""The board in a terminal: readable at 80 columns (split, never squeezed to nothing), a progress bar
on stderr while it builds, and one warning line naming each broken run dir."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from rich.console import Console

from test_leaderboard import make_run, record
from tsbench.leaderboard import build_leaderboard, discover_runs, load_results, rich_tables
from tsbench.leaderboard.build import STAGES
from tsbench.leaderboard.columns import family_columns
from tsbench.leaderboard.result import display_columns
from tsbench.results import JOURNAL

CATEGORIES = [c.category for c in family_columns("anomalyxl")]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """Every AnomalyXL column, a long model name and a reference note: the widest board there is."""
    root = tmp_path_factory.mktemp("wide")
    rows = [record(f"{c}{i}", c, 0.5) for c in CATEGORIES for i in range(2)]
    make_run(root, "a", "openai/a-rather-long-model-name", rows)
    make_run(root, "q", "vllm/Qwen/Qwen3.5-4B-Instruct", rows)
    make_run(root, "e", "detector/default", rows, harness="direct", reference="knows the generator")
    return root


@pytest.fixture(scope="module")
def board(root):
    stages: list[str] = []
    result = build_leaderboard([root], root / "board", n_boot=20, seed=1, progress=stages.append)
    result.stages = stages
    return result


def test_build_reports_every_stage_in_order(board):
    assert board.stages == list(STAGES)


def test_at_80_columns_every_column_keeps_its_width_and_says_where_it_is(board):
    console = Console(width=80, record=True, file=open(os.devnull, "w"))
    tables = rich_tables(board, width=80)
    headers = [c.header for c in display_columns(board.columns[board.datasets[0]])]
    assert len(headers) >= 16 and len(tables) > 1  # the paper's board does not fit in one 80-column table
    shown = []
    for table in tables:
        widths = table._calculate_column_widths(console, console.options)
        assert min(widths) >= 5, (table.title, widths)  # "0.500" fits; nothing collapses to zero width
        shown += [str(c.header) for c in table.columns[3:]]
        assert re.search(r"\(\d+ of \d+: ", str(table.title))  # the title says which columns it holds
        console.print(table)
    assert shown == headers  # each column once, in the board's order: wrapped, none dropped
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 80
    assert "openai/a-rather-long-model-name" in text and "(reference:" in text  # names whole, notes wrap
    assert "vllm/Qwen/Qwen3.5-4B-Instruct" in text  # a hub id is never cut mid-word either
    assert text.count("bold = best") == 1  # the legend once, under the last part


def test_a_wide_terminal_keeps_one_table(board):
    (table,) = rich_tables(board, width=400)
    assert len(table.columns) == 3 + len(display_columns(board.columns[board.datasets[0]]))
    assert rich_tables(board)[0].title == table.title  # no width: the layout of old


def test_broken_run_dirs_get_one_warning_line_each_naming_the_dir(tmp_path):
    make_run(tmp_path, "good", "m-good", [record("L0", "localize", 0.5)])
    bad_json = make_run(tmp_path, "bad-json", "m-a", [record("L0", "localize", 0.5)])
    (bad_json / "results.json").write_text("{not json")
    truncated = make_run(tmp_path, "truncated", "m-b", [record("L0", "localize", 0.5)])
    data = (truncated / "samples.parquet").read_bytes()
    (truncated / "samples.parquet").write_bytes(data[: len(data) // 2])
    garbage = make_run(tmp_path, "garbage", "m-c", [record("L0", "localize", 0.5)])
    (garbage / JOURNAL).write_bytes(b"\x00\x01garbage\n{not a record\n")
    renamed = make_run(tmp_path, "stored-name", "m-d", [record("L0", "localize", 0.5)])
    renamed = renamed.rename(tmp_path / "my-folder")
    found, _ = discover_runs([tmp_path])
    _, runs, warnings = load_results(found)  # what `leaderboard` prints, one "warning: " line each
    for run_dir in (bad_json, truncated, garbage):
        lines = [w for w in warnings if str(run_dir) in w]
        assert len(lines) == 1, (run_dir, warnings)
        assert "\n" not in lines[0]
    assert "my-folder" in {r.run_name for r in runs}  # runs are named by their folder


def _pty_run(args: list[str], columns: int) -> str:
    """The command in a pseudo-terminal of `columns` columns, as a user's shell runs it."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    proc = subprocess.Popen(args, stdin=child, stdout=child, stderr=child, env=env, close_fds=True)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(main)
    return b"".join(chunks).decode("utf-8", "replace")


def test_the_command_in_an_80_column_terminal_shows_progress_and_fits(root, tmp_path):
    out = _pty_run(
        [sys.executable, "-m", "tsbench.cli", "leaderboard", str(root), "--out", str(tmp_path), "--n-boot", "20"], 80
    )
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)
    assert "leaderboard" in plain and f"{len(STAGES)}/{len(STAGES)}" in plain  # the bar reached its end
    assert "(1 of " in plain and "Pres acc" in plain
    table_lines = [line for line in plain.splitlines() if line[:1] in "┏┃┡│└"]
    assert table_lines and max(len(line.rstrip("\r")) for line in table_lines) <= 80
