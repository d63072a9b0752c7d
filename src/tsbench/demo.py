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
AXL_DATA, AXL_RUNS = "data/demo/seed42", "results/demo"
STEPS = [
    "generate --preset small --seed 42 --split test --out data/demo",
    "describe data/demo/seed42/test-precise.parquet",
    f"eval --model scripted/zscore --harness rlm --data {AXL_DATA} --limit {SAME_ROWS} --concurrency 2"
    f" --out {AXL_RUNS}/scripted-zscore__rlm",
    f"eval --model detector/default --harness direct --data {AXL_DATA} --limit {SAME_ROWS}"
    f" --out {AXL_RUNS}/detector__direct",
    f"eval --model local/smollm2-135m --harness rlm --data {AXL_DATA} --limit {SAME_ROWS} --max-turns 2"
    f" --max-tokens 128 --concurrency 1 --out {AXL_RUNS}/smollm2-135m__rlm",
    f"show {AXL_RUNS}/smollm2-135m__rlm",
    f"show {AXL_RUNS}/smollm2-135m__rlm --id FIRST_LOCALIZE_ROW",  # filled in when the step runs
]
LEADERBOARD = (
    f"leaderboard {AXL_RUNS}/scripted-zscore__rlm {AXL_RUNS}/detector__direct {AXL_RUNS}/smollm2-135m__rlm"
    f" --out {AXL_RUNS}/leaderboard"
)
# TimeSage-EV: a few synthetic scenarios (one per tier), the scripted agent, the offline rules judge.
TS_DATA, TS_RUNS = "data/demo-timesage/seed42", "results/demo/timesage"
TS_EVAL = (
    f"eval --family timesage --model scripted/timesage --data {TS_DATA} --skills --judge judge/rules --concurrency 2"
)
TIMESAGE_STEPS = [
    "generate --family timesage --seed 42 --scenarios 3 --periods 4 --out data/demo-timesage",
    f"audit --family timesage {TS_DATA}",
    f"{TS_EVAL} --mode independent --out {TS_RUNS}/scripted__independent-skills",
    f"{TS_EVAL} --mode sequential --out {TS_RUNS}/scripted__sequential-skills",
    f"rescore {TS_RUNS}/scripted__sequential-skills --judge judge/rules"
    f" --out {TS_RUNS}/rescored/scripted__sequential-skills",
    f"leaderboard {TS_RUNS}/scripted__independent-skills {TS_RUNS}/scripted__sequential-skills"
    f" --out {TS_RUNS}/leaderboard",
]


def _first_localize_row(run: str) -> str:
    """The id a user would pick from the listing: `--limit` draws rows by seed, so no id is fixed."""
    from tsbench.results import load_samples

    ids = load_samples(run)["id"]
    return next((i for i in ids if i.startswith("test-localize-")), ids.iloc[0])


def main() -> None:
    steps = [*STEPS, LEADERBOARD, *TIMESAGE_STEPS]
    started = time.monotonic()
    for line in steps:
        args = line.split()  # no argument holds a space
        args = [_first_localize_row(args[1]) if a == "FIRST_LOCALIZE_ROW" else a for a in args]
        print(f"\n$ tsbench {shlex.join(args)}", flush=True)
        step = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "tsbench.cli", *args])
        if res.returncode != 0:
            sys.exit(res.returncode)
        print(f"({time.monotonic() - step:.0f} s)", flush=True)
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s; results under results/demo/", flush=True)


if __name__ == "__main__":
    main()
