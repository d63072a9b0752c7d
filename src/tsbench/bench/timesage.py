"""TimeSage-EV benchmarks: generating the default set (60 scenarios x 24 periods: seconds, MB on
disk, peak RSS), the scripted agent's seconds per period, the judge-cache hit rate of a rescore, the
calibration (data-blind, copy-last, truth, scripted floor side by side, per tier, judge/rules) and the
adversarial suite (every answer policy x report writer, per tier and axis, each bound and its margin)
on a seed the tests do not use."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from tsbench.bench.common import measure_in_child


def run_generate(out: str) -> int:
    from tsbench.tasks.timesage.generate import generate_from_options

    _, lines = generate_from_options({"seed": 42}, out)
    return sum(line["bytes"] for line in lines)


def run_scripted(data: str, out: str, mode: str, skills: bool) -> dict:
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval
    from tsbench.harness.episode import HarnessConfig
    from tsbench.results import load_samples

    cfg = EvalConfig(
        model="scripted/timesage",
        family="timesage",
        data=[data],
        concurrency=1,
        out=out,
        harness_config=HarnessConfig(mode=mode, skills=skills),
    )
    started = time.perf_counter()
    run_eval(cfg)
    wall = time.perf_counter() - started
    samples = load_samples(out)
    return {
        "rows": len(samples),
        "wall_s": wall,
        "errors": int(samples["error_type"].notna().sum()),
        "mean_overall": float(samples["score"].mean()) * 100,
    }


CALIBRATION_SEED = 31415  # no test uses it


def run_calibration(out: str, scenarios: int = 12, periods: int = 6) -> dict:
    from tsbench.baselines.timesage_calibration import POLICIES, calibrate
    from tsbench.tasks.timesage.generate import generate_from_options

    manifest, _ = generate_from_options(
        {"seed": CALIBRATION_SEED, "scenarios": scenarios, "periods": periods}, Path(out) / "calibration"
    )
    return calibrate(manifest.parent / "periods.parquet", (*POLICIES, "data_blind_guessing", "copy_last_text"))


def run_adversarial(out: str, scenarios: int = 12, periods: int = 6) -> tuple[dict, float]:
    """The adversarial suite (baselines/timesage_adversarial.py) on the calibration seed: (result, CPU s)."""
    from tsbench.baselines.timesage_adversarial import run_suite
    from tsbench.tasks.timesage.generate import generate_from_options

    manifest, _ = generate_from_options(
        {"seed": CALIBRATION_SEED, "scenarios": scenarios, "periods": periods}, Path(out) / "adversarial"
    )
    learned, _ = generate_from_options(  # the set the `prior` policy learns on
        {"seed": CALIBRATION_SEED + 1, "scenarios": scenarios, "periods": periods}, Path(out) / "adversarial"
    )
    started = time.process_time()
    result = run_suite(manifest.parent / "periods.parquet", prior_path=learned.parent / "periods.parquet")
    return result, time.process_time() - started


def calibration_table(result: dict) -> str:
    from tsbench.baselines.timesage_calibration import calibration_table as table

    variants = [
        f"{name} {result[name]['overall']:.1f}" for name in ("data_blind_guessing", "copy_last_text") if name in result
    ]
    return table(result) + ("\n  variants (overall): " + ", ".join(variants) if variants else "")


def main(scenarios: int = 3, periods: int = 3) -> dict:
    from tsbench.baselines.timesage_adversarial import suite_table
    from tsbench.eval.rescore import rescore_run
    from tsbench.tasks.timesage.generate import generate_from_options

    with tempfile.TemporaryDirectory() as tmp:
        gen_s, gen_rss, gen_bytes = measure_in_child(run_generate, tmp)
        small = Path(tmp) / "small"
        generate_from_options({"seed": 42, "scenarios": scenarios, "periods": periods}, small)
        data = str(small / "seed42")
        independent = run_scripted(data, str(Path(tmp) / "ind"), "independent", False)
        sequential = run_scripted(data, str(Path(tmp) / "seq"), "sequential", True)
        _, stats = rescore_run(Path(tmp) / "seq", "judge/rules", Path(tmp) / "rescored")
        calibration = run_calibration(tmp)
        adversarial, adversarial_cpu = run_adversarial(tmp)
    result = {
        "generate_s": gen_s,
        "generate_MB": gen_bytes / 2**20,
        "generate_peak_rss_GiB": gen_rss / 2**30,
        "scripted_s_per_period_independent": independent["wall_s"] / max(1, independent["rows"]),
        "scripted_s_per_period_sequential_skills": sequential["wall_s"] / max(1, sequential["rows"]),
        "rescore_judge_calls": stats.judge_calls,
        "rescore_cache_hit_rate": stats.hit_rate,
        "calibration": calibration,
        "adversarial": {f"{policy} x {writer}": cell for (policy, writer), cell in adversarial.items()},
    }

    print(
        f"timesage:\n"
        f"  generate default set (60 scenarios x 24 periods, synthetic, audited): {gen_s:6.2f} s, "
        f"{gen_bytes / 2**20:.1f} MB on disk, peak RSS {gen_rss / 2**30:.2f} GiB\n"
        f"  scripted/timesage, {independent['rows']} periods, concurrency 1: "
        f"{result['scripted_s_per_period_independent']:.2f} s/period independent, "
        f"{result['scripted_s_per_period_sequential_skills']:.2f} s/period sequential+skills "
        f"(overall {independent['mean_overall']:.1f} / {sequential['mean_overall']:.1f}, errors "
        f"{independent['errors']} / {sequential['errors']})\n"
        f"  rescore with judge/rules: {stats.judge_calls} judge calls, cache hit rate "
        f"{100 * (stats.hit_rate or 0):.1f} %\n"
        f"  calibration, judge/rules, seed {CALIBRATION_SEED} (overall 0-100; truth is a reference that sees the "
        f"withheld truth):\n{calibration_table(calibration)}\n"
        f"  adversarial suite, judge/rules, seed {CALIBRATION_SEED}, 12 scenarios x 6 periods ({len(adversarial)} "
        f"policy x writer combinations, {adversarial_cpu:.0f} CPU s; axes 0-100; margin > 0 inside the bound):\n"
        f"{suite_table(adversarial)}"
    )
    return result
