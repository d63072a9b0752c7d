"""A kernel lost mid-cell (killed, crashed, past its memory bound) is an infrastructure failure: the
episode ends as an error row of kind `kernel_lost`, never a scored answer, and resume runs it again.
Real kernels in real jails; the policy's own code SIGKILLs its kernel (tests/families/kernel_killer.py).
The same through Ray: tests/test_ray_executor.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from jail_episode import FINAL, ScriptedChat, attack_task, fenced
from tsbench import results as schema
from tsbench.core.config import build
from tsbench.core.episode import KERNEL_LOST
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import play
from tsbench.harness.rlm import RLMSettings

FAMILIES = Path(__file__).parent / "families"
sys.path.insert(0, str(FAMILIES))
pytestmark = pytest.mark.timeout(240)


def test_a_kernel_killed_mid_cell_ends_the_episode_as_an_error():
    model = ScriptedChat([fenced("x = 1"), fenced("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"), FINAL])
    outcome = play(model, "rlm", attack_task(), RLMSettings(max_turns=5, cell_timeout_s=60))
    assert outcome.error_type == KERNEL_LOST and "kernel died" in outcome.error
    result = outcome.result
    assert result.final_message == "" and result.turns == 2 and result.code_cells == 2  # never asked again
    cells = [entry["cells"] for entry in result.transcript if entry["role"] == "tool"]
    assert [cell[0]["restarted"] for cell in cells] == [False, True]


@pytest.fixture
def killer_policy(tmp_path, monkeypatch):
    """`test/kills-its-kernel` installed as a plugin for this process."""
    from kernel_killer import SPEC, forget_plugins, install_policy, use_here

    use_here(install_policy(tmp_path / "site"), monkeypatch)
    yield SPEC
    forget_plugins()  # later tests see the plugins as installed


def test_eval_records_a_lost_kernel_as_an_error_row_and_retries_it_on_resume(killer_policy, small_data, tmp_path):
    cfg = build(
        EvalConfig,
        {
            "data": [str(small_data)],
            "model": killer_policy,
            "harness": "rlm",
            "categories": ["localize"],
            "limit_per_category": 1,
            "out": str(tmp_path / "run"),
        },
    )
    run_dir = run_eval(cfg)
    row = pd.read_parquet(run_dir / schema.SAMPLES).iloc[0]
    assert row["error_type"] == KERNEL_LOST and pd.isna(row["score"]) and not row["valid"]
    assert "kernel died" in row["error"] and row["final_message"] in (None, "")
    assert not json.loads((run_dir / schema.RUN_JSON).read_text())["complete"]
    run_eval(cfg)  # resume: the error row is played again (and is lost again)
    lines = (run_dir / schema.JOURNAL).read_text().splitlines()
    assert [json.loads(line)["error_type"] for line in lines] == [KERNEL_LOST, KERNEL_LOST]
