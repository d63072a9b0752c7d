"""TimeSage-EV boards: the paper's Table 12, Table 2, Figs. 7, 9 and 10, and tokens and cost, from
results rows alone (pure pandas; figures in timesage_figures.py).

Conventions: a configuration is (model, harness with its variant: mode, skills, judge), so runs
scored by the offline judge/rules are labelled as such in every table. Axis values are the
row-level 0-100 numbers in `metrics`; means are over scored rows (error rows are left out and
counted in the tokens table). Family scores are the mean accuracy of a row's fields of that
family, with a percentile bootstrap 95 % interval over rows. The tiers, axes and question families
are the family's own (`TaskFamily.taxonomy`), never copied here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tsbench.core.stats import bootstrap_ci
from tsbench.results import load_run
from tsbench.tasks.base import Taxonomy

from .load import RunInfo
from .stats import cell_seed

RULES_JUDGE = "judge/rules"
COUNTS = "skills_induced skill_calls judge_calls judge_cache_hits judge_tokens judge_error_axes compactions".split()
FAMILY_COLUMNS = ["config", "family", "name", "n", "mean", "lo", "hi"]
PAIR_COLUMNS = (
    "pair model independent sequential period_index overall_independent overall_sequential difference".split()
)
TOKEN_COLUMNS = (
    "config rows errors input_tokens output_tokens tokens_per_period cost_usd cost_known compactions judge_calls "
    "judge_cache_hit_rate judge_tokens judge_error_share judge_cost_usd judge_cost_known"
).split()


@dataclass
class Boards:
    """Every TimeSage table of one dataset, as frames, plus the settings of each configuration."""

    axes: pd.DataFrame
    families: pd.DataFrame
    by_period: pd.DataFrame
    seq_vs_ind: pd.DataFrame
    skills: pd.DataFrame
    skills_by_tier: pd.DataFrame
    tokens: pd.DataFrame
    taxonomy: Taxonomy = field(default_factory=Taxonomy)  # the family's tiers, axes and question families
    settings: dict[str, dict] = field(default_factory=dict)  # config label -> run settings

    @property
    def axis_names(self) -> tuple[str, ...]:
        return axes_of(self.taxonomy)


def axes_of(taxonomy: Taxonomy) -> tuple[str, ...]:
    """The family's scoring axes and their overall."""
    return (*taxonomy.axes, "overall")


def config_of(model: str, harness: str, reference) -> str:
    note = f" (reference: {reference})" if isinstance(reference, str) and reference else ""
    return f"{model} · {harness}{note}"


def _metric(rows: pd.DataFrame, name: str) -> pd.Series:
    return rows["metrics"].map(lambda m: (m or {}).get(name)).astype(float)


def prepare(rows: pd.DataFrame, taxonomy: Taxonomy) -> pd.DataFrame:
    """TimeSage rows with the columns the boards read: config, tier, period_index, axes, tokens."""
    out = rows.copy()
    out["config"] = [config_of(m, h, r) for m, h, r in zip(out["model"], out["harness"], out["reference"])]
    out["tier"] = out["category"]
    out["period_index"] = out["attributes"].map(lambda a: int((a or {}).get("period_index", 0) or 0))
    for axis in axes_of(taxonomy):
        out[axis] = _metric(out, axis)
    for letter in taxonomy.groups:
        out[f"family_{letter}"] = _metric(out, f"family_{letter}")
    for name in COUNTS:
        out[name] = _metric(out, name).fillna(0.0)
    out["judge_cost_usd"] = _metric(out, "judge_cost_usd")  # NaN: the judge's price is unknown (or no judge ran)
    out["tokens"] = out["input_tokens"].fillna(0) + out["output_tokens"].fillna(0)
    out["scored"] = out["error_type"].isna() & out["score"].notna()
    return out


def axes_table(rows: pd.DataFrame, taxonomy: Taxonomy) -> pd.DataFrame:
    """Table 12: per configuration, the four axes and the overall by tier and over all tiers."""
    records = []
    axes = axes_of(taxonomy)
    scored = rows[rows["scored"]]
    for config, part in scored.groupby("config", sort=True):
        for tier in ("overall", *taxonomy.tiers):
            cut = part if tier == "overall" else part[part["tier"] == tier]
            if cut.empty:
                continue
            records.append(
                {"config": config, "tier": tier, "n": len(cut), **{axis: float(cut[axis].mean()) for axis in axes}}
            )
    return pd.DataFrame(records, columns=["config", "tier", "n", *axes])


def family_table(rows: pd.DataFrame, taxonomy: Taxonomy, n_boot: int, seed: int) -> pd.DataFrame:
    """Table 2: per configuration and question family, the mean with a bootstrap 95 % interval."""
    records = []
    for config, part in rows[rows["scored"]].groupby("config", sort=True):
        for letter, name in taxonomy.groups.items():
            values = part[f"family_{letter}"].dropna().to_numpy()
            if not len(values):
                continue
            lo, hi = bootstrap_ci(values, n_boot=n_boot, seed=cell_seed(seed, config, letter))
            records.append((config, letter, name, len(values), float(values.mean()), lo, hi))
    return pd.DataFrame(records, columns=FAMILY_COLUMNS)


def period_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Fig. 7: the overall score by period index (t-23 .. t when 24 periods)."""
    scored = rows[rows["scored"]]
    if scored.empty:
        return pd.DataFrame(columns=["config", "period_index", "n", "overall"])
    table = scored.groupby(["config", "period_index"]).agg(n=("overall", "size"), overall=("overall", "mean"))
    return table.reset_index()


def seq_vs_ind_table(rows: pd.DataFrame, settings: dict[str, dict]) -> pd.DataFrame:
    """Fig. 9: configurations equal but for the mode, side by side by period."""
    periods = period_table(rows)
    by_mode: dict[tuple, dict[str, str]] = {}
    for config, s in settings.items():
        key = (s.get("model"), s.get("harness"), bool(s.get("skills")), s.get("judge") or RULES_JUDGE)
        by_mode.setdefault(key, {})[s.get("mode") or "independent"] = config
    records = []
    for (model, harness, skills, judge), modes in sorted(by_mode.items(), key=lambda kv: str(kv[0])):
        if "independent" not in modes or "sequential" not in modes:
            continue
        pair = f"{model} {harness} [{'skills, ' if skills else ''}{judge}]"  # everything the two runs share
        ind, seq = modes["independent"], modes["sequential"]
        a = periods[periods["config"] == ind].set_index("period_index")["overall"]
        b = periods[periods["config"] == seq].set_index("period_index")["overall"]
        for i in sorted(set(a.index) & set(b.index)):
            records.append((pair, model, ind, seq, int(i), float(a[i]), float(b[i]), float(b[i] - a[i])))
    return pd.DataFrame(records, columns=PAIR_COLUMNS)


def skills_tables(
    rows: pd.DataFrame, settings: dict[str, dict], taxonomy: Taxonomy
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 10: skill induction and reuse rates and tokens per period (c, d), and by tier (a, b),
    for configurations that ran with the skill library."""
    with_skills = [c for c, s in settings.items() if s.get("skills")]
    part = rows[rows["config"].isin(with_skills) & rows["error_type"].isna()]
    by_period = (
        part.groupby(["config", "period_index"])
        .agg(
            rows=("id", "size"),
            induction_rate=("skills_induced", lambda s: float((s > 0).mean())),
            reuse_rate=("skill_calls", lambda s: float((s > 0).mean())),
            tokens=("tokens", "mean"),
        )
        .reset_index()
    )
    by_tier = (
        part.groupby(["config", "tier"])
        .agg(
            rows=("id", "size"),
            skill_call_rate=("skill_calls", lambda s: float((s > 0).mean())),
            calls_per_period=("skill_calls", "mean"),
            tokens=("tokens", "mean"),
            overall=("overall", "mean"),
        )
        .reset_index()
    )
    tiers = taxonomy.tiers
    by_tier = by_tier.sort_values(["config", "tier"], key=lambda c: c.map(tiers.index) if c.name == "tier" else c)
    return by_period, by_tier.reset_index(drop=True)


def tokens_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Tokens and cost per configuration; error rows count here (they spent their tokens)."""
    records = []
    for config, part in rows.groupby("config", sort=True):
        known = part["cost_usd"].dropna()
        judge_known = part["judge_cost_usd"].dropna()
        calls, hits = float(part["judge_calls"].sum()), float(part["judge_cache_hits"].sum())
        records.append(
            {
                "config": config,
                "rows": len(part),
                "errors": int(part["error_type"].notna().sum()),
                "input_tokens": int(part["input_tokens"].fillna(0).sum()),
                "output_tokens": int(part["output_tokens"].fillna(0).sum()),
                "tokens_per_period": float(part["tokens"].mean()),
                "cost_usd": float(known.sum()) if len(known) else np.nan,
                "cost_known": len(known),
                "compactions": int(part["compactions"].sum()),
                "judge_calls": int(calls),
                "judge_cache_hit_rate": hits / calls if calls else np.nan,
                "judge_tokens": int(part["judge_tokens"].sum()),
                # rows with an axis scored 0 because the judge's reply could not be read (flagged, never dropped)
                "judge_error_share": float((part["judge_error_axes"] > 0).mean()) if len(part) else np.nan,
                "judge_cost_usd": float(judge_known.sum()) if len(judge_known) else np.nan,
                "judge_cost_known": len(judge_known),
            }
        )
    return pd.DataFrame(records, columns=TOKEN_COLUMNS)


def run_settings(runs: list[RunInfo], dataset: str) -> dict[str, dict]:
    """config label -> the run's settings (mode, skills, judge), read from run.json."""
    out = {}
    for run in runs:
        if run.dataset != dataset:
            continue
        try:
            settings = dict(load_run(run.path).get("settings", {}))
        except (OSError, ValueError):
            settings = {}
        settings.setdefault("model", run.model)
        out[config_of(run.model, run.harness, run.reference)] = settings
    return out


def boards(
    rows: pd.DataFrame, runs: list[RunInfo], dataset: str, taxonomy: Taxonomy, n_boot: int = 1000, seed: int = 0
) -> Boards:
    part = prepare(rows[rows["dataset"] == dataset], taxonomy)
    settings = run_settings(runs, dataset)
    by_period, by_tier = skills_tables(part, settings, taxonomy)
    return Boards(
        axes=axes_table(part, taxonomy),
        families=family_table(part, taxonomy, n_boot, seed),
        by_period=period_table(part),
        seq_vs_ind=seq_vs_ind_table(part, settings),
        skills=by_period,
        skills_by_tier=by_tier,
        tokens=tokens_table(part),
        taxonomy=taxonomy,
        settings=settings,
    )
