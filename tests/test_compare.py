"""`tsbench compare`: the paired statistics against scipy/statsmodels on known cases, and the command
on two real runs (scripted policies on the small split) checked by an independent computation."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower

from tsbench.core.errors import UserError
from tsbench.leaderboard.compare import compare_frames
from tsbench.leaderboard.significance import (
    EXACT_BINARY,
    PERMUTATION,
    holm,
    mcnemar_exact_p,
    paired_comparison,
    permutation_p,
    rows_needed,
)


def _binary_pairs(both: int, a_only: int, b_only: int, neither: int) -> tuple[list[int], list[int]]:
    a = [1] * both + [1] * a_only + [0] * b_only + [0] * neither
    b = [1] * both + [0] * a_only + [1] * b_only + [0] * neither
    return a, b


@pytest.mark.parametrize("cells", [(20, 3, 10, 7), (5, 0, 6, 1), (40, 12, 12, 3), (1, 1, 0, 0)])
def test_mcnemar_exact_matches_statsmodels(cells):
    both, a_only, b_only, neither = cells
    a, b = _binary_pairs(*cells)
    expected = mcnemar([[both, a_only], [b_only, neither]], exact=True).pvalue
    assert mcnemar_exact_p(a, b) == pytest.approx(expected, rel=1e-12)
    assert paired_comparison(a, b, n_boot=50).test == EXACT_BINARY


def test_holm_matches_statsmodels():
    rng = np.random.default_rng(3)
    for size in (1, 2, 5, 11):
        p = rng.uniform(0, 0.2, size)
        assert holm(p) == pytest.approx(multipletests(p, method="holm")[1].tolist(), rel=1e-12)
    assert holm([0.01, 0.01, 0.04]) == pytest.approx(multipletests([0.01, 0.01, 0.04], method="holm")[1].tolist())


def test_permutation_p_is_the_exact_sign_flip_test_on_small_n():
    """n = 10 paired rows: 1024 sign patterns, fewer than the resamples, so scipy enumerates them;
    the p-value must equal a brute-force enumeration written here."""
    rng = np.random.default_rng(7)
    a = rng.uniform(0, 1, 10)
    b = np.clip(a - rng.normal(0.15, 0.2, 10), 0, 1)
    d = a - b
    observed = abs(d.mean())
    flips = np.array(list(itertools.product([1, -1], repeat=d.size)))
    means = (flips * d).mean(axis=1)
    expected = np.mean(np.abs(means) >= observed - 1e-12)
    assert permutation_p(a, b, seed=1) == pytest.approx(expected, rel=1e-9)
    assert permutation_p(a, b, seed=1) == permutation_p(a, b, seed=99)  # exact: the seed does not matter
    assert paired_comparison(a, b, n_boot=50).test == PERMUTATION


def test_permutation_p_monte_carlo_is_seeded_and_close_to_the_t_test():
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(11)
    a = rng.uniform(0, 1, 300)
    b = np.clip(a - rng.normal(0.03, 0.3, 300), 0, 1)
    first, second = permutation_p(a, b, seed=5), permutation_p(a, b, seed=5)
    assert first == second
    assert first == pytest.approx(ttest_rel(a, b).pvalue, abs=0.03)


def test_rows_needed_is_the_normal_approximation():
    rng = np.random.default_rng(2)
    d = rng.normal(0.08, 0.4, 500)
    effect = d.mean() / d.std(ddof=1)
    by_statsmodels = NormalIndPower().solve_power(effect_size=effect, alpha=0.05, power=0.8, ratio=0)
    assert rows_needed(d) == math.ceil(by_statsmodels)
    z = norm.ppf(0.975) + norm.ppf(0.8)
    assert rows_needed(d) == math.ceil((z * d.std(ddof=1) / abs(d.mean())) ** 2)
    assert rows_needed(np.zeros(10)) is None
    assert rows_needed([0.5, 0.5, 0.5]) == 2  # no spread at all: the floor


def _frame(scores: dict[str, float], category: str = "localize") -> pd.DataFrame:
    return pd.DataFrame(
        {"id": list(scores), "epoch": 0, "category": category, "score": list(scores.values()), "error_type": None}
    )


def test_compare_frames_pairs_common_rows_and_counts_what_each_lacks():
    a = _frame({"r1": 1.0, "r2": 0.0, "r3": 1.0, "r4": 0.5})
    b = _frame({"r1": 0.0, "r2": 0.0, "r3": 1.0, "r5": 1.0})
    b.loc[b["id"] == "r3", ["score", "error_type"]] = [None, "timeout"]  # an error row is a row it lacks
    comparison = compare_frames({"A": a, "B": b}, n_boot=200)
    assert comparison.common == 2
    assert {s.label: s.lacks for s in comparison.sides} == {"A": 1, "B": 2}  # union r1 r2 r3 r4 r5
    assert comparison.pairs[0].overall.result.diff == pytest.approx(0.5)
    with pytest.raises(UserError, match="no scored rows in common"):
        compare_frames({"A": _frame({"x": 1.0}), "B": _frame({"y": 1.0})})
    with pytest.raises(UserError, match="at least two runs"):
        compare_frames({"A": a})


@pytest.fixture(scope="module")
def two_runs(small_data, tmp_path_factory):
    """scripted/zscore (single-pass-text) with the default prompt budget and with a short one (a
    coarser stride over the series) on the 44-row small split: two real runs a few rows apart."""
    import tsbench

    root = tmp_path_factory.mktemp("compare")
    zscore = tsbench.evaluate("scripted/zscore", small_data, harness="single-pass-text", out=root / "zscore")
    short = tsbench.evaluate(
        "scripted/zscore", small_data, harness="single-pass-text", out=root / "short", text_budget_chars=3000
    )
    return zscore, short


def test_compare_two_real_runs_against_an_independent_computation(two_runs, cli, tmp_path):
    zscore, short = two_runs
    code, out, err = cli("compare", zscore.run_dir, short.run_dir, "--out", tmp_path / "board")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("zscore − short"))
    assert re.fullmatch(
        r"zscore − short = [+-]\d\.\d{3} \[-?\d\.\d{3}, -?\d\.\d{3}\], p (=|<) \d\.\d{3} \(Holm\), n = 44", line
    )
    # the same numbers from the raw samples, without tsbench's comparison code
    a = pd.read_parquet(zscore.run_dir / "samples.parquet")[["id", "epoch", "category", "score"]]
    b = pd.read_parquet(short.run_dir / "samples.parquet")[["id", "epoch", "score"]]
    both = a.merge(b, on=["id", "epoch"], suffixes=("_a", "_b"))
    diff = float((both["score_a"] - both["score_b"]).mean())
    assert f"= {diff:+.3f} [" in line
    table = pd.read_csv(tmp_path / "board" / "compare.csv")
    categories = table[table["category"] != "overall"].set_index("category")
    raw = []
    for category, part in both.groupby("category", sort=True):
        row = categories.loc[category]
        assert row["diff"] == pytest.approx(float((part["score_a"] - part["score_b"]).mean()))
        binary = part[["score_a", "score_b"]].isin([0.0, 1.0]).all().all()
        assert row["test"] == (EXACT_BINARY if binary else PERMUTATION)
        if binary:
            ct = pd.crosstab(part["score_a"], part["score_b"]).reindex(
                index=[1.0, 0.0], columns=[1.0, 0.0], fill_value=0
            )
            assert row["p"] == pytest.approx(mcnemar(ct.to_numpy(), exact=True).pvalue)
        raw.append(row["p"])
    assert categories["p_holm"].tolist() == pytest.approx(multipletests(raw, method="holm")[1].tolist())
    md = (tmp_path / "board" / "compare.md").read_text()
    assert "| zscore | short | overall | 44 |" in md and "sha " in md
    assert "<table>" in (tmp_path / "board" / "compare.html").read_text()


def test_leaderboard_paired_block_has_the_same_tests(two_runs, small_data):
    """The board's paired section carries the same p (Holm across a pair's categories) and power; each
    run's data hash is the manifest's, which the board prints beside the dataset."""
    import json

    from tsbench.core.data_hash import manifest_split_hash
    from tsbench.leaderboard.load import load_results
    from tsbench.leaderboard.tables import paired_table

    rows, infos, _ = load_results([run.run_dir for run in two_runs])
    paired = paired_table(rows, n_boot=200)
    assert len(paired) and {"test", "p", "p_holm", "rows_needed"} <= set(paired.columns)
    assert paired["p_holm"].tolist() == pytest.approx(multipletests(paired["p"], method="holm")[1].tolist())
    manifest = json.loads((small_data / "manifest.json").read_text())
    assert {info.data_hash for info in infos} == {manifest_split_hash(manifest, "test")}


def test_compare_bad_input_is_one_line_and_exit_2(two_runs, small_data, cli, tmp_path):
    import tsbench

    zscore, _ = two_runs
    only = {
        category: tsbench.evaluate(
            "scripted/zscore", small_data, harness="single-pass-text", out=tmp_path / category, categories=[category]
        )
        for category in ("presence", "start_time")
    }
    for args, message in [
        ((only["presence"].run_dir, only["start_time"].run_dir), "no scored rows in common"),
        ((zscore.run_dir,), "at least two different runs"),
        ((zscore.run_dir, tmp_path / "missing"), "is not a run directory"),
        ((zscore.run_dir, zscore.run_dir), "at least two different runs"),
    ]:
        code, out, err = cli("compare", *args)
        assert code == 2 and err.count("\n") == 1 and message in err, err
