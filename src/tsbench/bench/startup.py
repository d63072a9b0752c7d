"""Start-up cost of the command line, beside a reference, measured interleaved.

* `tsbench eval --help`: wall seconds of the whole process (and its CPU seconds, the honest number on a
  loaded machine); goal < 0.3 s;
* an eval's start: CPU seconds (user + system) a `tsbench eval` process spends before its first episode
  begins (imports, settings, the family, the run dir, the row's data), read in the process when `play`
  first hands an episode over; goal < 1 CPU-s. The whole one-row eval (scripted/zscore, single-pass-text:
  no kernel) is shown beside it;
* tsbench modules one rlm episode imports (in a fresh process); goal <= 70.

The reference (e.g. main before a change) is another checkout's sources (TSBENCH_BENCH_REFERENCE=/path/to/src)
or this repository's at a git revision (TSBENCH_BENCH_REFERENCE=main: its src/ unpacked with `git archive`),
measured interleaved with this tree. Both run from compiled bytecode, as an installed package
does (PYTHONPYCACHEPREFIX: a read-only checkout gets its .pyc files too). The floor is what a one-option
typer command pays for its --help (typer alone: cli/common.py `as_text` keeps pydantic out of ours too).
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
EVAL_START = """
import resource, sys
import tsbench.harness.play

played = sys.modules["tsbench.harness.play"]  # the package's name `play` is the function

first = played.episode_outcome


def at_first_episode(*args, **kwargs):
    if not hasattr(at_first_episode, "cpu"):
        usage = resource.getrusage(resource.RUSAGE_SELF)
        at_first_episode.cpu = usage.ru_utime + usage.ru_stime
        print(f"start-cpu {at_first_episode.cpu:.4f}", file=sys.stderr)
    return first(*args, **kwargs)


played.episode_outcome = at_first_episode
from tsbench.cli import main

sys.argv = ["tsbench", *sys.argv[1:]]
main()
"""
FLOOR = """
import typer

app = typer.Typer(add_completion=False, rich_markup_mode=None)


@app.command()
def one(x: int = 1) -> None: ...


app(["--help"])
"""
RLM_EPISODE = """
import sys
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
cfg = EvalConfig(model="scripted/trivial-code", harness="rlm", data=[sys.argv[1]], limit=1, out=sys.argv[2])
cfg.harness_config.unsafe_sandbox, cfg.harness_config.max_turns = True, 1  # as any checkout's config takes them
run_eval(cfg)
print(" ".join(sorted(sys.modules)))
"""


def _run(src: str | None, args: list[str], pycache: str = "") -> tuple[float, float, str, str]:
    """(wall seconds, CPU seconds, stdout, stderr) of a fresh python process with `src` first on its path
    (bytecode under `pycache`; "" keeps Python's own places)."""
    import time

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": pycache}
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
    return wall, cpu, done.stdout, done.stderr


def episode_modules(src: str | None, data: Path, out: Path, pycache: str = "") -> list[str]:
    """Every module a fresh process holds after one rlm episode (scripted model, one turn)."""
    return _run(src, ["-c", RLM_EPISODE, str(data), str(out)], pycache)[2].splitlines()[-1].split()


def tsbench_modules(names: list[str]) -> list[str]:
    return [name for name in names if name.split(".")[0] == "tsbench"]


def _sources_at(revision: str, folder: Path) -> str:
    """This repository's src/ as of a git revision (`main`, a commit), unpacked under `folder`."""
    repo = Path(__file__).resolve().parents[3]
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", revision, "src"], capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"TSBENCH_BENCH_REFERENCE={revision}: no such folder or git revision here")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return str(folder / "src")


def _data(folder: Path) -> Path:
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.generate import generate_split, update_manifest

    config = preset("small")
    update_manifest(config, folder, {"test": generate_split(config, "test", folder)})
    return next(folder.rglob("test-precise.parquet"))


def main() -> None:
    ours = str(Path(__file__).resolve().parents[2])
    reference = os.environ.get("TSBENCH_BENCH_REFERENCE")
    with tempfile.TemporaryDirectory() as tmp:
        if reference and not Path(reference).is_dir():
            reference = _sources_at(reference, Path(tmp) / "reference")
        sides = {"this tree": ours, **({"reference": reference} if reference else {})}
        data = _data(Path(tmp) / "data")
        pycache = str(Path(tmp) / "pycache")
        helps: dict[str, list[float]] = {name: [] for name in sides}
        help_cpu: dict[str, list[float]] = {name: [] for name in sides}
        starts: dict[str, list[float]] = {name: [] for name in sides}
        whole: dict[str, list[float]] = {name: [] for name in sides}
        floor = []
        for index in range(ROUNDS + 1):  # round 0 compiles every side's bytecode and is not counted
            order = list(sides) if index % 2 == 0 else list(sides)[::-1]
            for name in order:
                wall, cpu, _, _ = _run(sides[name], ["-m", "tsbench.cli", "eval", "--help"], pycache)
                out = str(Path(tmp) / f"{name.replace(' ', '_')}{index}")
                args = ["eval", "--model", "scripted/zscore", "--harness", "single-pass-text", "--data", str(data)]
                _, total, _, err = _run(sides[name], ["-c", EVAL_START, *args, "--limit", "1", "--out", out], pycache)
                if index:
                    helps[name].append(wall)
                    help_cpu[name].append(cpu)
                    whole[name].append(total)
                    starts[name].append(float(err.split("start-cpu ")[1].split()[0]))
            floor.append(_run(None, ["-c", FLOOR], pycache)[1])
        modules = {
            name: len(tsbench_modules(episode_modules(src, data, Path(tmp) / f"rlm_{i}", pycache)))
            for i, (name, src) in enumerate(sides.items())
        }
    print(f"startup ({load_average()}; medians of {ROUNDS}, sides interleaved, from bytecode; CPU = user + sys)")
    if reference:
        print(f"  reference: {os.environ['TSBENCH_BENCH_REFERENCE']}")
    print(f"  floor: a one-option typer command's --help {statistics.median(floor):.3f} CPU-s")
    for name in sides:
        help_cpu_s, start_cpu = statistics.median(help_cpu[name]), statistics.median(starts[name])
        print(
            f"  {name}: eval --help {help_cpu_s:.3f} CPU-s, {statistics.median(helps[name]):.3f} s wall (goal < "
            f"{HELP_GOAL_S}: {'met' if help_cpu_s < HELP_GOAL_S else 'missed'}); eval start {start_cpu:.2f} CPU-s "
            f"(goal < {START_GOAL_CPU_S}: {'met' if start_cpu < START_GOAL_CPU_S else 'missed'}; the one-row eval "
            f"{statistics.median(whole[name]):.2f} CPU-s); rlm episode imports {modules[name]} tsbench modules "
            f"(goal <= {MODULES_GOAL}: {'met' if modules[name] <= MODULES_GOAL else 'missed'})"
        )


if __name__ == "__main__":
    main()
