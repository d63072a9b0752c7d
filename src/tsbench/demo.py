"""`make demo`: the main job end to end on the embedded small preset, offline.

Each step is the exact `tsbench` command a user would type, printed before it runs.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

# Every AnomalyXL run of the demo plays the same rows (--limit draws by --seed), so its leaderboard compares
# like with like: no "n common of" cells, no warnings about runs of different sizes.
SAME_ROWS = "4"
STEPS = [
    ["generate", "--preset", "small", "--seed", "42", "--split", "test", "--out", "data/demo"],
    ["describe", "data/demo/seed42/test-precise.parquet"],
    [
        "eval",
        "--model",
        "scripted/zscore",
        "--harness",
        "rlm",
        "--data",
        "data/demo/seed42",
        "--limit",
        SAME_ROWS,
        "--concurrency",
        "2",
        "--out",
        "results/demo/scripted-zscore__rlm",
    ],
    [
        "eval",
        "--model",
        "detector/default",
        "--harness",
        "direct",
        "--data",
        "data/demo/seed42",
        "--limit",
        SAME_ROWS,
        "--out",
        "results/demo/detector__direct",
    ],
    [
        "eval",
        "--model",
        "local/smollm2-135m",
        "--harness",
        "rlm",
        "--data",
        "data/demo/seed42",
        "--limit",
        SAME_ROWS,
        "--max-turns",
        "2",
        "--max-tokens",
        "128",
        "--concurrency",
        "1",
        "--out",
        "results/demo/smollm2-135m__rlm",
    ],
    ["show", "results/demo/smollm2-135m__rlm"],
    ["show", "results/demo/smollm2-135m__rlm", "--id", "{first localize row}"],
]
LEADERBOARD = [
    "leaderboard",
    "results/demo/scripted-zscore__rlm",
    "results/demo/detector__direct",
    "results/demo/smollm2-135m__rlm",
    "--out",
    "results/demo/leaderboard",
]
# TimeSage-EV: a few synthetic scenarios (one per tier), the scripted agent, the offline rules judge.
TS_DATA, TS_RUNS = "data/demo-timesage/seed42", "results/demo/timesage"
TIMESAGE_STEPS = [
    [
        "generate",
        "--family",
        "timesage",
        "--seed",
        "42",
        "--scenarios",
        "3",
        "--periods",
        "4",
        "--out",
        "data/demo-timesage",
    ],
    ["audit", "--family", "timesage", TS_DATA],
    [
        "eval",
        "--family",
        "timesage",
        "--model",
        "scripted/timesage",
        "--data",
        TS_DATA,
        "--mode",
        "independent",
        "--skills",
        "--judge",
        "judge/rules",
        "--concurrency",
        "2",
        "--out",
        f"{TS_RUNS}/scripted__independent-skills",
    ],
    [
        "eval",
        "--family",
        "timesage",
        "--model",
        "scripted/timesage",
        "--data",
        TS_DATA,
        "--mode",
        "sequential",
        "--skills",
        "--judge",
        "judge/rules",
        "--concurrency",
        "2",
        "--out",
        f"{TS_RUNS}/scripted__sequential-skills",
    ],
    [
        "rescore",
        f"{TS_RUNS}/scripted__sequential-skills",
        "--judge",
        "judge/rules",
        "--out",
        f"{TS_RUNS}/rescored/scripted__sequential-skills",
    ],
    [
        "leaderboard",
        f"{TS_RUNS}/scripted__independent-skills",
        f"{TS_RUNS}/scripted__sequential-skills",
        "--out",
        f"{TS_RUNS}/leaderboard",
    ],
]


def _first_localize_row(run: str) -> str:
    """The id a user would pick from the listing: `--limit` draws rows by seed, so no id is fixed."""
    from tsbench.results import load_samples

    ids = load_samples(run)["id"]
    return next((i for i in ids if i.startswith("test-localize-")), ids.iloc[0])


def main() -> None:
    steps = [*STEPS, LEADERBOARD, *TIMESAGE_STEPS]
    started = time.monotonic()
    for args in steps:
        args = [_first_localize_row(args[1]) if a == "{first localize row}" else a for a in args]
        print(f"\n$ tsbench {shlex.join(args)}", flush=True)
        step = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "tsbench.cli", *args])
        if res.returncode != 0:
            sys.exit(res.returncode)
        print(f"({time.monotonic() - step:.0f} s)", flush=True)
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s; results under results/demo/", flush=True)


if __name__ == "__main__":
    main()
