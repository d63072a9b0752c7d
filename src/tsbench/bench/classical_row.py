"""The paper's Classical row (Table 1, Appendix B) regenerated at a fraction of its scale.

`python -m tsbench.bench classical-row` generates AnomalyXL at seed 42 with the paper's grid
(lengths 16k-131k) and a fraction of its rows (train 5,000, val 500, test 50 per cell: 800 precise
+ their MCQ projections), trains the classical heads (`sft-baseline --model classical`), answers
every test row as `tsbench eval --model classical/<dir> --harness direct` does, and prints the 11
cells: the paper's value, ours, our 95 % bootstrap interval, whether the paper's value is inside it.

    TSBENCH_CLASSICAL_FRACTION  share of the paper's rows (default 0.02; 1 is the full row)
    TSBENCH_CLASSICAL_DIR       where data and model go (default: a temporary folder)
    TSBENCH_CLASSICAL_WORKERS   feature-extraction processes (default 2)
    TSBENCH_CLASSICAL_TEST_FRACTION  share of the paper's test rows (default: the fraction); the test
                                split is cheap beside training, and a folder run before keeps its features

At 0.02 a cell has 1 test row per (category, L) cell (16 precise rows): the intervals are wide and
the verdicts say little; at 1 it is the paper's experiment (hours of CPU; README gives the cost).
`make bench-classical` runs 0.1 of the train rows and 0.25 of the test (about an hour on 2 busy
cores); docs/fidelity.md holds its 11 cells and the reasons for the cells outside.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from pathlib import Path

from tsbench.bench.common import load_average

PAPER = {  # Table 1, "Classical / Features + GBT heads"
    "presence": 0.861,
    "start_time": 0.981,
    "categorization": 0.643,
    "magnitude_band": 0.945,
    "identification": 0.739,
    "indicator": 0.521,
    "localize": 0.160,
    "classify_with_evidence": 0.022,
    "measure_magnitude": 0.685,
    "localize_all_channels": 0.549,
    "lead_lag_with_magnitude": 0.108,
}
PAPER_ROWS = {"train": 5000, "val": 500, "rows_per_cell": 50}


def generate(root: Path, fraction: float, test_fraction: float | None = None) -> Path:
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest

    cfg = preset(
        "paper",
        train_rows=max(16, round(PAPER_ROWS["train"] * fraction)),
        val_rows=max(16, round(PAPER_ROWS["val"] * fraction)),
        rows_per_cell=max(1, round(PAPER_ROWS["rows_per_cell"] * (test_fraction or fraction))),
    )
    entries = {split: generate_split(cfg, split, root) for split in ("test", "val", "train")}
    update_manifest(cfg, root, entries)
    return root / "seed42"


def answer_test(model_dir: Path, data: Path) -> dict[str, list[tuple]]:
    """{category: [(score, gold answer, parsed answer), ...]} over the test split, as the direct harness."""
    from tsbench.baselines import classical_policy
    from tsbench.core.episode import EpisodeTask
    from tsbench.tasks.anomalyxl.metrics import metrics
    from tsbench.tasks.anomalyxl.rows import iter_rows

    model = classical_policy.build(str(model_dir))
    out: dict[str, list[tuple]] = {}
    for regime in ("precise", "coarse"):
        for row in iter_rows(data / f"test-{regime}.parquet"):
            task = EpisodeTask(
                row.id, row.category, row.regime, row.question, row.channel_names, row.values, row.options
            )
            result = metrics(row.category, row.gold, model.answer(task))
            parsed = result["parsed"] if isinstance(result["parsed"], str) else None
            out.setdefault(row.category, []).append((float(result["score"]), row.gold.get("answer"), parsed))
    return out


def cells(answers: dict[str, list[tuple]]) -> list[dict]:
    """The 11 cells: macro-F1 for the MCQ columns, the mean row score for the precise ones."""
    from tsbench.core.stats import bootstrap_ci
    from tsbench.leaderboard.stats import bootstrap_macro_f1_ci, mcq_macro_f1
    from tsbench.tasks.anomalyxl import labels as lb

    lines = []
    for category, paper in PAPER.items():
        rows = answers.get(category, [])
        if not rows:
            lines.append({"category": category, "paper": paper, "ours": None, "n": 0})
            continue
        if category in lb.MCQ_CATEGORIES:
            options = list(lb.MCQ_OPTIONS.get(category) or sorted({g for _, g, _ in rows}))
            golds, preds = [g for _, g, _ in rows], [p or "" for _, _, p in rows]
            ours = mcq_macro_f1(options, golds, preds)
            lo, hi = bootstrap_macro_f1_ci(options, golds, preds, n_boot=1000, seed=0)
        else:
            scores = [s for s, _, _ in rows]
            ours = sum(scores) / len(scores)
            lo, hi = bootstrap_ci(scores, n_boot=1000, seed=0) if len(scores) > 1 else (ours, ours)
        inside = lo <= paper <= hi
        lines.append(
            {"category": category, "paper": paper, "ours": ours, "lo": lo, "hi": hi, "n": len(rows), "inside": inside}
        )
    return lines


def main() -> None:
    from tsbench.baselines.classical import train_classical

    fraction = float(os.environ.get("TSBENCH_CLASSICAL_FRACTION", "0.02"))
    test_fraction = float(os.environ.get("TSBENCH_CLASSICAL_TEST_FRACTION", fraction))
    workers = int(os.environ.get("TSBENCH_CLASSICAL_WORKERS", "2"))
    given = os.environ.get("TSBENCH_CLASSICAL_DIR")
    base = Path(given) if given else Path(tempfile.mkdtemp(prefix="classical-row-"))
    print(
        f"classical row at {fraction:g} of the paper's rows ({test_fraction:g} of its test), in {base} ({load_average()})"
    )
    started = time.perf_counter()
    data = generate(base / "data", fraction, test_fraction)
    generated = time.perf_counter()
    summary = train_classical(data, base / "model", workers=workers)
    trained = time.perf_counter()
    lines = cells(answer_test(base / "model", data))
    done = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # GiB (Linux counts KiB)
    workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    print(
        f"generate {generated - started:.0f} s, train {trained - generated:.0f} s, eval {done - trained:.0f} s; "
        f"peak RSS {peak:.2f} GiB (largest child process {workers_peak:.2f} GiB)"
    )
    print(f"{'cell':<26}{'n':>5}{'paper':>8}{'ours':>8}  95% CI          verdict")
    for line in lines:
        if line["ours"] is None:
            print(f"{line['category']:<26}{0:>5}{line['paper']:>8.3f}       -  -               no rows")
            continue
        verdict = "inside" if line["inside"] else ("above" if line["ours"] > line["paper"] else "below")
        print(
            f"{line['category']:<26}{line['n']:>5}{line['paper']:>8.3f}{line['ours']:>8.3f}"
            f"  [{line['lo']:.3f}, {line['hi']:.3f}]  {verdict}"
        )
    report = {
        "fraction": fraction,
        "test_fraction": test_fraction,
        "training": summary,
        "cells": lines,
        "seconds": round(done - started, 1),
    }
    report["peak_rss_gib"] = round(peak, 3)
    (base / "classical_row.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"wrote {base / 'classical_row.json'}")
