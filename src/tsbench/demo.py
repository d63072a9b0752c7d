"""`make demo`: the main job end to end on the embedded small preset, offline.

Each step is the exact `tsbench` command a user would type, printed before it runs.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

STEPS = [
    ["generate", "--preset", "small", "--seed", "42", "--split", "test", "--out", "data/demo"],
    ["describe", "data/demo/seed42/test-precise.parquet"],
    ["eval", "--model", "scripted/zscore", "--harness", "rlm", "--data", "data/demo/seed42",
     "--limit", "2", "--concurrency", "2", "--out", "results/demo/scripted-zscore__rlm"],
    ["eval", "--model", "detector/default", "--harness", "direct", "--data", "data/demo/seed42",
     "--limit", "2", "--out", "results/demo/detector__direct"],
    ["eval", "--model", "local/smollm2-135m", "--harness", "rlm", "--data", "data/demo/seed42", "--limit", "1",
     "--max-turns", "3", "--max-tokens", "160", "--concurrency", "1", "--out", "results/demo/smollm2-135m__rlm"],
    ["show", "results/demo/smollm2-135m__rlm", "--id", "test-localize-1024-00000"],
]
LEADERBOARD = ["leaderboard", "results/demo/scripted-zscore__rlm", "results/demo/detector__direct",
               "results/demo/smollm2-135m__rlm", "--out", "results/demo/leaderboard"]


def main() -> None:
    steps = [*STEPS, LEADERBOARD]
    started = time.monotonic()
    for args in steps:
        print(f"\n$ tsbench {shlex.join(args)}", flush=True)
        res = subprocess.run([sys.executable, "-m", "tsbench.cli", *args])
        if res.returncode != 0:
            sys.exit(res.returncode)
    print(f"\ndemo finished in {time.monotonic() - started:.0f} s; results under results/demo/", flush=True)


if __name__ == "__main__":
    main()
