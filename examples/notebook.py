"""A notebook's worth of tsbench from Python: generate -> evaluate -> compare -> leaderboard -> probe.

    python examples/notebook.py [WORK_DIR]

Runs in about a minute on a laptop with no model and no network: two reference policies (the
scripted z-score policy reading the prompt, the detector reading the series) on the small split.
Swap in a model spec ("openai/gpt-4.1-mini", "vllm/<hf-id>", ...) for a real comparison.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import tsbench


def main(work: Path) -> None:
    # 1. a generated split (same seed and options -> same bytes)
    data = tsbench.generate("anomalyxl", preset="small", seed=42, out=work / "data")
    print(f"data: {data.path} (sha {data.data_hash()}), {len(data.files)} files")

    # 2. two runs; each returns the run dir, its rows as a DataFrame and results.json
    zscore = tsbench.evaluate("scripted/zscore", data, harness="single-pass-text", out=work / "runs" / "zscore")
    detector = tsbench.evaluate("detector/default", data, harness="direct", out=work / "runs" / "detector")
    print(zscore.rows.groupby("category")["score"].mean().round(3).to_string())
    print("overall:", zscore.summary["overall"]["mean"], "vs", detector.summary["overall"]["mean"])

    # 3. is the detector better, per category and overall (paired, exact/permutation p, Holm, power)
    comparison = tsbench.compare(detector, zscore, out=work / "compare")
    print("\n".join(comparison.lines()))
    print(comparison.table()[["category", "diff", "lo", "hi", "p_holm", "rows_needed"]].round(3).to_string())

    # 4. the leaderboard, every table a DataFrame, files written to out
    board = tsbench.leaderboard([zscore, detector], out=work / "leaderboard", n_boot=200)
    print(board.wide.to_string(max_cols=8))

    # 5. has the policy memorised the published split? (regenerate with new seeds, run both, compare)
    report = tsbench.contamination.probe("scripted/zscore", data, harness="single-pass-text", out=work / "probe")
    print(report.verdict)

    # bad input raises one typed error, whose message is the command line's one line
    try:
        tsbench.compare(zscore)
    except tsbench.UserError as exc:
        print("UserError:", exc)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tsbench-notebook-")))
