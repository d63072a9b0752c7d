"""Start-up cost of the command line, beside a reference, measured interleaved.

* `tsbench eval --help`: wall seconds of the whole process (and its CPU seconds, the honest number on a
  loaded machine); goal < 0.3 s;
* an eval's start: CPU seconds (user + system) of a `tsbench eval` process that plays one scripted row
  (the row itself costs milliseconds: what is measured is imports, settings, the family, the run dir);
  goal < 1 CPU-s;
* tsbench modules one rlm episode imports (in a fresh process); goal <= 70.

The reference is another checkout's sources (TSBENCH_BENCH_REFERENCE=/path/to/src, e.g. main's before a
change) or, without one, the floor every typer command pays (`import typer, rich`).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tsbench.bench.common import load_average

HELP_GOAL_S, START_GOAL_CPU_S, MODULES_GOAL = 0.3, 1.0, 70
ROUNDS = 3
RLM_EPISODE = """
import sys
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
cfg = EvalConfig(model="scripted/trivial-code", harness="rlm", data=[sys.argv[1]], limit=1, out=sys.argv[2])
cfg.harness_config.unsafe_sandbox, cfg.harness_config.max_turns = True, 1  # as any checkout's config takes them
run_eval(cfg)
print(sum(1 for name in sys.modules if name.startswith("tsbench")))
"""


def _run(src: str | None, args: list[str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of a fresh python process with `src` first on its path."""
    import time

    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])} failed: {done.stderr[-1500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _data(folder: Path) -> Path:
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest

    config = preset("small")
    update_manifest(config, folder, {"test": generate_split(config, "test", folder)})
    return next(folder.rglob("test-precise.parquet"))


def main() -> None:
    ours = str(Path(__file__).resolve().parents[2])
    reference = os.environ.get("TSBENCH_BENCH_REFERENCE")
    sides = {"this tree": ours, **({"reference": reference} if reference else {})}
    with tempfile.TemporaryDirectory() as tmp:
        data = _data(Path(tmp) / "data")
        helps: dict[str, list[float]] = {name: [] for name in sides}
        help_cpu: dict[str, list[float]] = {name: [] for name in sides}
        starts: dict[str, list[float]] = {name: [] for name in sides}
        floor = []
        for index in range(ROUNDS):
            order = list(sides) if index % 2 == 0 else list(sides)[::-1]
            for name in order:
                wall, cpu, _ = _run(sides[name], ["-m", "tsbench.cli", "eval", "--help"])
                helps[name].append(wall)
                help_cpu[name].append(cpu)
                out = str(Path(tmp) / f"{name.replace(' ', '_')}{index}")
                args = ["-m", "tsbench.cli", "eval", "--model", "scripted/zscore", "--data", str(data)]
                starts[name].append(_run(sides[name], [*args, "--limit", "1", "--out", out])[1])
            floor.append(_run(None, ["-c", "import typer, rich"])[0])
        modules = {
            name: int(_run(src, ["-c", RLM_EPISODE, str(data), str(Path(tmp) / f"rlm_{i}")])[2].split()[-1])
            for i, (name, src) in enumerate(sides.items())
        }
    print(f"startup ({load_average()}; medians of {ROUNDS}, sides interleaved)")
    print(f"  floor: python -c 'import typer, rich' {statistics.median(floor):.3f} s")
    for name in sides:
        help_s, start_cpu = statistics.median(helps[name]), statistics.median(starts[name])
        print(
            f"  {name}: eval --help {help_s:.3f} s, {statistics.median(help_cpu[name]):.3f} CPU-s (goal < {HELP_GOAL_S}: "
            f"{'met' if help_s < HELP_GOAL_S else 'missed'}); eval start {start_cpu:.2f} CPU-s (goal < "
            f"{START_GOAL_CPU_S}: {'met' if start_cpu < START_GOAL_CPU_S else 'missed'}); rlm episode imports "
            f"{modules[name]} tsbench modules (goal <= {MODULES_GOAL}: "
            f"{'met' if modules[name] <= MODULES_GOAL else 'missed'})"
        )


if __name__ == "__main__":
    main()
