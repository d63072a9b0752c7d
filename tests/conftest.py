"""Shared fixtures: one small generated dataset per test session (the project's own data, no downloads)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on `path`: released when the holder ends, however it ends (a crash included)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(shared: Path, name: str, build: Callable[[Path], object]) -> tuple[Path, object]:
    """(shared/name, what `build` returned) for `build(shared/name)` run once for every process that asks:
    the first builds while the others wait on a file lock, then all read it. A failed build leaves nothing
    behind, so the next to ask builds again. What `build` returns is kept as JSON beside the folder."""
    folder, result = shared / name, shared / f"{name}.json"
    with _locked(shared / f"{name}.lock"):
        if not result.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            value = build(folder)
            result.write_text(json.dumps(value))
    return folder, json.loads(result.read_text())


@pytest.fixture(scope="session")
def built_once(tmp_path_factory) -> Callable[[str, Callable[[Path], object]], tuple[Path, object]]:
    """`built_once(name, build)`: build_once in a folder that every xdist worker of this test run shares.

    A trained model costs minutes of CPU; tests in several files can start from the same one, built once per
    test run (beside the workers' own temp roots, so each run builds afresh). The folder is the same for every
    user: copy it before changing anything in it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # /tmp/pytest-of-<user>/pytest-<n>/ holds popen-gw0, popen-gw1, ...
    shared = root / "built-once"
    shared.mkdir(exist_ok=True)
    return lambda name, build: build_once(shared, name, build)


def _train_classical_small(folder: Path) -> dict:
    """`--preset small` at seed 42, all three splits (folder/data/seed42), and the classical heads fitted on
    its train and val splits in this process (folder/model, features cached under folder/model/features)."""
    from tsbench.baselines import classical
    from tsbench.tasks.anomalyxl.generate import generate_split

    cfg = preset("small")
    for split in ("test", "val", "train"):
        generate_split(cfg, split, folder / "data")
    calls: list = []
    summary = classical.train_classical(
        folder / "data" / "seed42", folder / "model", progress=lambda *a: calls.append(a), workers=1
    )
    return {"summary": summary, "progress": calls}


@pytest.fixture(scope="session")
def classical_small(built_once) -> tuple[Path, dict]:
    """The classical baseline trained once per test run (tests/test_classical.py reads it, tests/test_cli.py
    starts from its feature cache): (folder, {"summary": train_classical's, "progress": its progress calls})."""
    return built_once("classical-small", _train_classical_small)


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
