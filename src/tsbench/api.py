"""The Python API a notebook lives on: generate -> evaluate -> compare -> leaderboard.

Each function calls what the command of the same name calls (the family's `generate`, the eval
runner, the comparison, the leaderboard build), so a number from Python is the number the command
line prints. Bad input raises `UserError` (tsbench.UserError), whose message is the one line the
command prints before exiting with code 2.

    import tsbench
    data = tsbench.generate(preset="small", out="data/anomalyxl")
    run = tsbench.evaluate("scripted/zscore", data, harness="single-pass-text", out="results/zscore")
    run.rows.groupby("category")["score"].mean()
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from tsbench.core.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

    from tsbench.leaderboard import LeaderboardResult
    from tsbench.leaderboard.compare import Comparison

PathLike = Union[str, Path]


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """What the command line turns into its one line (a missing file too) arrives as a UserError."""
    try:
        yield
    except UserError:
        raise
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None


@dataclass
class Dataset:
    """A generated split folder (`<root>/seed<seed>/`): its parquet files and manifest."""

    path: Path
    manifest: dict = field(repr=False)

    @property
    def files(self) -> list[Path]:
        return sorted(self.path.glob("*.parquet"))

    def data_hash(self, split: str = "test") -> str:
        """The split's file hash, as boards print it beside the numbers (core/data_hash.py)."""
        from tsbench.core.data_hash import manifest_split_hash

        return manifest_split_hash(self.manifest, split)

    @classmethod
    def load(cls, path: PathLike) -> Dataset:
        folder = Path(path)
        manifest = folder / "manifest.json"
        if not manifest.is_file():
            raise UserError(f"{folder} is not a generated split folder (no manifest.json)")
        return cls(folder, json.loads(manifest.read_text(encoding="utf-8")))

    def __fspath__(self) -> str:
        return str(self.path)


@dataclass
class Run:
    """One run directory: its rows (one per (id, epoch)), its results.json and its run.json."""

    run_dir: Path
    results: dict = field(repr=False)
    info: dict = field(repr=False)

    @property
    def rows(self) -> pd.DataFrame:
        """The run's rows as the results reader gives them (re-read, so a resumed run is current)."""
        from tsbench.results import load_samples

        return load_samples(self.run_dir)

    @property
    def summary(self) -> dict:
        """results.json's per-category and overall numbers."""
        from tsbench.results import results_json

        return results_json.summary_of(self.results) or {}

    @classmethod
    def load(cls, run_dir: PathLike) -> Run:
        from tsbench.core import json_input
        from tsbench.results import RESULTS_JSON, is_run_dir, load_run

        path = Path(run_dir)
        if not is_run_dir(path):
            raise UserError(f"{path} is not a run directory (no run.json)")
        results = json_input.read_json(path / RESULTS_JSON) if (path / RESULTS_JSON).is_file() else {}
        return cls(path, results if isinstance(results, dict) else {}, load_run(path))

    def __fspath__(self) -> str:
        return str(self.run_dir)


def generate(family: str = "anomalyxl", *, out: PathLike | None = None, **options: Any) -> Dataset:
    """Generate a family's split as `tsbench generate` does (same seed and options, same bytes).

    ``options`` are the command's, by name: seed, split, preset, rows_per_cell, lengths (a list of
    ints), categories (a list), ...; files go to ``<out>/seed<seed>/`` (default: the family's root)."""
    from tsbench.tasks import get_taskset

    with user_errors():
        taskset = get_taskset(family)
        options = {k: v for k, v in options.items() if v is not None}
        options.setdefault("seed", 42)
        manifest, _ = taskset.generate(options, Path(out) if out is not None else taskset.default_root())
        return Dataset.load(Path(manifest).parent)


def evaluate(
    model: str,
    data: PathLike | Sequence[PathLike] | None = None,
    *,
    harness: str | None = None,
    out: PathLike | None = None,
    **settings: Any,
) -> Run:
    """Evaluate ``model`` under ``harness`` as `tsbench eval` does; re-running resumes.

    ``settings`` are any `tsbench eval` setting by its name (family, limit, categories, base_url,
    concurrency, the harness's own, ...). Returns the run with its rows and results."""
    from tsbench.core.config import build
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval

    values = dict(settings, model=model)
    if data is not None:
        items = [data] if isinstance(data, (str, Path, Dataset)) else list(data)
        values["data"] = [str(Path(item)) for item in items]
    if harness is not None:
        values["harness"] = harness
    if out is not None:
        values["out"] = str(out)
    with user_errors():
        cfg = build(EvalConfig, values, where="setting")
        return Run.load(run_eval(cfg))


def compare(*runs: PathLike | Run, n_boot: int = 1000, seed: int = 0, out: PathLike | None = None) -> Comparison:
    """Compare runs on the rows they all scored (`tsbench compare`): per category and overall, the
    paired difference, its bootstrap interval, an exact or permutation p (Holm) and the rows a
    replication needs. With ``out``, compare.{md,html,csv} are written there."""
    from tsbench.leaderboard.compare import compare_runs, write_comparison

    with user_errors():
        comparison = compare_runs([Path(r) for r in runs], n_boot=n_boot, seed=seed)
        if out is not None:
            write_comparison(comparison, Path(out))
        return comparison


def leaderboard(
    runs: Sequence[PathLike | Run] = ("results",),
    out: PathLike = "results/leaderboard",
    *,
    with_paper: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
) -> LeaderboardResult:
    """Build the leaderboard (`tsbench leaderboard`): every table as a DataFrame, files into ``out``."""
    from tsbench.leaderboard import build_leaderboard

    if n_boot < 1:
        raise UserError(f"--n-boot must be at least 1 (got {n_boot})")
    with user_errors():
        try:
            return build_leaderboard(
                [Path(r) for r in runs], Path(out), with_paper=with_paper, n_boot=n_boot, seed=seed
            )
        except UserError:
            raise
        except ValueError as exc:
            raise UserError(str(exc)) from None
