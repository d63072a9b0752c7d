"""Each row says where it was played (`node`: the host name; `worker`), and `tsbench show --by
node|worker` and the leaderboard's by_node.csv group rows by it. Ray rows: tests/test_ray_executor.py."""

from __future__ import annotations

import socket

import pandas as pd
import pytest

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.results.origin import UNRECORDED, by_origin


@pytest.fixture(scope="module")
def run_dir(small_data, tmp_path_factory):
    cfg = {
        "data": [str(small_data)],
        "model": "detector/default",
        "harness": "direct",
        "categories": ["presence", "start_time"],
        "limit_per_category": 2,
        "concurrency": 2,
        "out": str(tmp_path_factory.mktemp("origin") / "run"),
    }
    return run_eval(build(EvalConfig, cfg))


def test_thread_executor_rows_name_this_host_and_their_thread(run_dir):
    samples = pd.read_parquet(run_dir / schema.SAMPLES)
    assert len(samples) == 4 and (samples["node"] == socket.gethostname()).all()
    assert samples["worker"].str.fullmatch(r"threads:episode_\d+@\d+").all()


def test_by_origin_counts_errors_apart_and_names_unrecorded_rows():
    rows = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "node": ["n1", "n1", "n2", None],
            "worker": ["w1", "w2", "w3", None],
            "score": [1.0, None, 0.5, 0.0],
            "error_type": [None, "worker_lost", None, None],
            "latency_s": [2.0, 0.0, 4.0, 1.0],
        }
    )
    table = by_origin(rows, "node").set_index("node")
    assert table.loc["n1"].tolist() == [2, 1, 1, 1.0, 2.0, 2]  # the error row is in rows, never in a mean
    assert table.loc["n2", "mean_score"] == 0.5 and table.loc[UNRECORDED, "rows"] == 1
    assert by_origin(rows.drop(columns=["node", "worker"]), "worker")["worker"].tolist() == [UNRECORDED]


def test_show_groups_a_run_by_node_and_refuses_other_groupings(run_dir, cli):
    code, out, _ = cli("show", str(run_dir), "--by", "node")
    assert code == 0
    line = next(line for line in out.splitlines() if line.split()[:1] == [socket.gethostname()])
    assert line.split()[1:4] == ["4", "0", "4"]  # rows, errors, scored
    code, out, _ = cli("show", str(run_dir), "--by", "worker")
    assert code == 0 and "threads:episode_" in out
    code, _, err = cli("show", str(run_dir), "--by", "model")
    assert code == 2 and err.strip().splitlines() == ["error: --by must be node or worker (got 'model')"]
