"""TimeSage-EV benchmarks: generating the default set (60 scenarios x 24 periods: seconds, MB on
disk, peak RSS), the scripted agent's seconds per period, the judge-cache hit rate of a rescore, the
calibration (data-blind, copy-last, truth, scripted floor side by side, per tier, judge/rules) and the
adversarial suite (every answer policy x report writer, per tier and axis, each bound and its margin)
on three seeds the tests do not use, under judge/rules and under the model-judge path with a stand-in
judge that answers off format (baselines/timesage_standin.py)."""

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
    from tsbench.core.config import build
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval
    from tsbench.results import load_samples

    cfg = build(
        EvalConfig,
        dict(
            model="scripted/timesage", family="timesage", data=[data], concurrency=1, out=out, mode=mode, skills=skills
        ),
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


SUITE_SEEDS = (CALIBRATION_SEED, 27182, 16180)  # seeds no test uses
SUITE_JUDGES = ("rules", "standin")  # judge/rules; the model-judge path with a stand-in answering off format


def run_adversarial(
    out: str, scenarios: int = 12, periods: int = 6, seed: int = CALIBRATION_SEED, judge: str = "rules"
) -> tuple[dict, float]:
    """The adversarial suite (baselines/timesage_adversarial.py) on one seed with one judge: (result, CPU s)."""
    from tsbench.baselines.timesage_adversarial import run_suite
    from tsbench.tasks.timesage.generate import generate_from_options

    manifest, _ = generate_from_options(
        {"seed": seed, "scenarios": scenarios, "periods": periods}, Path(out) / "adversarial"
    )
    learned, _ = generate_from_options(  # the set the `prior` policy learns on
        {"seed": seed + 1, "scenarios": scenarios, "periods": periods}, Path(out) / "adversarial"
    )
    started = time.process_time()
    result = run_suite(manifest.parent / "periods.parquet", prior_path=learned.parent / "periods.parquet", judge=judge)
    return result, time.process_time() - started


def adversarial_cpu_of(seconds: float) -> str:
    return f"{seconds:.0f} CPU s"


def calibration_table(result: dict) -> str:
    from tsbench.baselines.timesage_calibration import calibration_table as table

    variants = [
        f"{name} {result[name]['overall']:.1f}" for name in ("data_blind_guessing", "copy_last_text") if name in result
    ]
    return table(result) + ("\n  variants (overall): " + ", ".join(variants) if variants else "")


def main(scenarios: int = 3, periods: int = 3) -> dict:
    from tsbench.baselines.timesage_adversarial import suite_matrix, suite_table, violations
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
        suites = {
            (seed, judge): run_adversarial(tmp, seed=seed, judge=judge)
            for seed in SUITE_SEEDS
            for judge in SUITE_JUDGES
        }
        adversarial, adversarial_cpu = suites[(CALIBRATION_SEED, "rules")]
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
        "adversarial_suites": {
            f"{seed} {judge}": {f"{p} x {w}": cell for (p, w), cell in found.items()}
            for (seed, judge), (found, _) in suites.items()
        },
        "adversarial_violations": {
            f"{seed} {judge}": violations(found) for (seed, judge), (found, _) in suites.items()
        },
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
        f"{suite_table(adversarial)}\n"
        f"  adversarial suite, writer x seed x judge (12 scenarios x 6 periods each; truth's axes; the best blind "
        f"and copying policy per writer):\n{suite_matrix({k: v for k, (v, _) in suites.items()})}\n"
        + "\n".join(
            f"  seed {seed}, {judge}: {len(found)} combinations, {adversarial_cpu_of(cpu)}; "
            + ("every bound holds" if not violations(found) else "OUT OF BOUNDS: " + "; ".join(violations(found)))
            for (seed, judge), (found, cpu) in suites.items()
        )
    )
    return result
