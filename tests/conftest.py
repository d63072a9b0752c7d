"""Shared fixtures: one small generated dataset per test session (the project's own data, no downloads)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The tools harness would compile stumpy in a background process on first use: not during tests.
os.environ.setdefault("TSBENCH_STUMPY_WARMUP", "0")

from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest


@pytest.fixture(scope="session")
def small_data(tmp_path_factory) -> Path:
    """`--preset small` test split at seed 42: <root>/seed42/test-{precise,coarse}.parquet."""
    root = tmp_path_factory.mktemp("anomalyxl")
    cfg = preset("small")
    entries = {"test": generate_split(cfg, "test", root)}
    update_manifest(cfg, root, entries)
    return root / "seed42"


# The files that take longest (measured with --durations on 2 cores), longest first. `--dist loadfile` hands
# whole files to workers in collection order: these go out first, so the run ends on short files on every
# worker instead of one worker finishing a long file alone (xdist's own order puts files with many tests
# first, which sends these last). A file missing here only loses its place in the queue.
LONGEST_FIRST = (
    "test_real_server.py",
    "test_cli.py",
    "test_ray_executor.py",
    "test_readme_tour.py",
    "test_train_grpo.py",
    "test_sft.py",
    "test_eval.py",
    "test_quick_tour.py",
    "test_egress.py",
    "test_timemaster_learning.py",
    "test_train_multiprocess.py",
    "test_timeclaw_tools.py",
    "test_train_check.py",
    "test_features.py",
    "test_timesage_adversarial.py",
    "test_tslm.py",
    "test_harness_subclass.py",
    "test_timeclaw_ablation.py",
    "test_train_pure.py",
    "test_leaderboard.py",
    "test_plugin_harness.py",
)


def pytest_configure(config):
    """`@pytest.mark.timeout(T)` stays a hang guard at a load of 20: a test still working past T is given
    up to T times the load factor (tsbench/testing/timeouts.py); an idle one fails at T. Files are handed
    to xdist workers longest first (LONGEST_FIRST), not in xdist's most-tests-first order."""
    if config.pluginmanager.hasplugin("timeout"):
        from tsbench.testing.timeouts import LoadAwareTimeout

        config.pluginmanager.register(LoadAwareTimeout(), "tsbench-load-aware-timeout")
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """The longest files first, the rest in their usual order (a stable sort: tests keep theirs)."""
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture
def one_torch_thread():
    """Training tests: the CI box's 2 cores are shared, and OpenMP barriers across busy cores cost more
    than they gain."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _run_tsbench(*args) -> int:
    """The `tsbench` command line run in this process (sys.argv set for the call): its exit code."""
    from tsbench.cli import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["tsbench", *map(str, args)])
        try:
            main()
        except SystemExit as exited:
            return exited.code or 0
    return 0


@pytest.fixture(scope="session")
def run_tsbench():
    """`run_tsbench(*args)`: the command line in this process, output not captured; its exit code.
    Session-scoped, so module fixtures (a trained run shared by a file's tests) can use it."""
    return _run_tsbench


@pytest.fixture
def cli(capsys):
    """`cli(*args)`: the command line in this process; (exit code, stdout, stderr) of that call."""

    def run(*args) -> tuple[int, str, str]:
        capsys.readouterr()
        code = _run_tsbench(*args)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
