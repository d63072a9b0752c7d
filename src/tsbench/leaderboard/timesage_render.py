"""TimeSage boards as (title, intro, (header, rows)) sections and figures (PNG, SVG, PDF), attached to a
LeaderboardResult so the HTML and Markdown renderers show them under the dataset's main table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from tsbench.tasks import get_taskset

from .figures import plot_series, render
from .result import DASH, LeaderboardResult, fmt_dollars
from .timesage import RULES_JUDGE, Boards, boards

Section = tuple[str, str, tuple[list, list[list]]]
SCORE_AXIS = "overall score (0-100)"
TOKEN_HEADER = (
    "Configuration, Rows, Errors, Tokens in, Tokens out, Tokens / period, $ total, Compactions, Judge calls, "
    "Judge cache hits, Judge tokens, Judge errors, Judge $"
).split(", ")


def _f(value, digits: int = 1) -> str:
    return DASH if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _pct(value) -> str:
    return DASH if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f} %"


def sections(b: Boards) -> list[Section]:
    out: list[Section] = []

    def add(title: str, intro: str, table: tuple[list, list[list]]) -> None:
        out.append((title, intro, table))

    header = ["Configuration", "Tier", "n", *(axis.capitalize() for axis in b.axis_names)]
    rows = [
        [r.config, r.tier.capitalize(), r.n, *(_f(getattr(r, a), 2) for a in b.axis_names)]
        for r in b.axes.itertuples(index=False)
    ]
    note = (
        "Scores of configurations judged by judge/rules (offline literal and numeric matching) are labelled "
        "'judge/rules' and are not comparable with a model judge's."
        if any(RULES_JUDGE in r[0] for r in rows)
        else ""
    )
    add(
        "Axes by tier (paper Table 12)",
        "Means over scored periods, each axis 0-100; overall = mean of the scored axes. " + note,
        (header, rows),
    )
    wide = b.families.pivot_table(index="config", columns="family", values=["mean", "lo", "hi", "n"], aggfunc="first")
    rows = []
    for config in sorted(b.families["config"].unique()):
        cells = []
        for letter in b.taxonomy.groups:
            if ("mean", letter) in wide.columns and not pd.isna(wide.loc[config, ("mean", letter)]):
                m, lo, hi = (wide.loc[config, (k, letter)] for k in ("mean", "lo", "hi"))
                cells.append(f"{m:.1f} [+{hi - m:.1f} −{m - lo:.1f}]")
            else:
                cells.append(DASH)
        rows.append([config, *cells])
    add(
        "Per question family (paper Table 2)",
        "Mean field accuracy of each family, with a percentile bootstrap 95 % interval over periods (x [+high −low]).",
        (["Configuration", *b.taxonomy.groups.values()], rows),
    )
    periods = sorted(b.by_period["period_index"].unique()) if len(b.by_period) else []
    last = max(periods) if periods else 0
    rows = []
    for config, part in b.by_period.groupby("config", sort=True):
        at = dict(zip(part["period_index"], part["overall"]))
        rows.append([config, *(_f(at.get(p)) for p in periods)])
    add(
        "Overall by period (paper Fig. 7)",
        "Mean overall score at each period index (t-k = k periods before the latest).",
        (["Configuration", *(f"t-{last - p}" if p != last else "t" for p in periods)], rows),
    )
    rows = [
        [r.pair, r.period_index, _f(r.overall_independent), _f(r.overall_sequential), f"{r.difference:+.1f}"]
        for r in b.seq_vs_ind.itertuples(index=False)
    ]
    add(
        "Sequential vs independent (paper Fig. 9)",
        "Configurations equal but for the mode, overall by period.",
        (["Configuration pair", "Period", "Independent", "Sequential", "Seq − ind"], rows),
    )
    rows = [
        [r.config, r.period_index, r.rows, _pct(r.induction_rate), _pct(r.reuse_rate), _f(r.tokens, 0)]
        for r in b.skills.itertuples(index=False)
    ]
    add(
        "Skill induction and reuse (paper Fig. 10 c, d)",
        "Share of periods that admitted a new skill and that called a registered one; mean tokens per period.",
        (["Configuration", "Period", "Rows", "Induction", "Reuse", "Tokens / period"], rows),
    )
    rows = [
        [
            r.config,
            r.tier.capitalize(),
            r.rows,
            _pct(r.skill_call_rate),
            _f(r.calls_per_period, 2),
            _f(r.tokens, 0),
            _f(r.overall),
        ]
        for r in b.skills_by_tier.itertuples(index=False)
    ]
    add(
        "Skills by tier (paper Fig. 10 a, b)",
        "",
        (["Configuration", "Tier", "Rows", "Skill use", "Calls / period", "Tokens / period", "Overall"], rows),
    )
    rows = [
        [
            r.config,
            r.rows,
            r.errors,
            f"{r.input_tokens:,}",
            f"{r.output_tokens:,}",
            _f(r.tokens_per_period, 0),
            fmt_dollars(r.cost_usd, r.cost_known, r.rows),
            r.compactions,
            r.judge_calls,
            _pct(r.judge_cache_hit_rate),
            f"{r.judge_tokens:,}",
            _pct(r.judge_error_share),
            fmt_dollars(r.judge_cost_usd, r.judge_cost_known, r.rows),
        ]
        for r in b.tokens.itertuples(index=False)
    ]
    add(
        "Tokens and cost",
        "Totals over all rows (error rows spent tokens too); judge calls, the share "
        "answered from the run's judge cache, the share of rows with an axis scored 0 because the judge's reply "
        "could not be read (a judge error: flagged, the overall still averages all four axes), and what the "
        "judge's own calls spent (cached calls cost nothing).",
        (TOKEN_HEADER, rows),
    )
    return out


def _period_axis(ax, indices: pd.Series, ylabel: str) -> None:
    """Periods on x, ticks at the periods themselves (one period never reads 1.900 ... 2.100), half a
    period of room."""
    periods = sorted(int(p) for p in indices.unique())
    if len(periods) <= 12:
        ax.set_xticks(periods)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(periods[0] - 0.5, periods[-1] + 0.5)
    ax.set_xlabel("period index (1 = oldest)")
    ax.set_ylabel(ylabel)


def period_figure(b: Boards) -> Figure | None:
    if b.by_period.empty:
        return None
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    drawn: list = []
    for config, part in b.by_period.groupby("config", sort=True):
        plot_series(ax, part["period_index"], part["overall"], config, drawn, marker="o", clip_on=False)
    _period_axis(ax, b.by_period["period_index"], SCORE_AXIS)
    ax.set_ylim(0, 100)
    ax.set_title("TimeSage overall score by period (like the paper's Fig. 7)")
    fig.legend(loc="outside lower center", frameon=False)
    return fig


def seq_figure(b: Boards) -> Figure | None:
    if b.seq_vs_ind.empty:
        return None
    pairs = sorted(b.seq_vs_ind["pair"].unique())  # one panel per pair: a model may run with and without skills
    fig = Figure(figsize=(7.5, 1.0 + 2.8 * len(pairs)), layout="constrained")
    for i, pair in enumerate(pairs):
        ax = fig.add_subplot(len(pairs), 1, i + 1)
        part = b.seq_vs_ind[b.seq_vs_ind["pair"] == pair]
        drawn: list = []
        plot_series(ax, part["period_index"], part["overall_independent"], "independent", drawn, marker="o")
        plot_series(ax, part["period_index"], part["overall_sequential"], "sequential", drawn, marker="s")
        ax.set_title(pair)
        _period_axis(ax, part["period_index"], SCORE_AXIS)
        ax.set_ylim(0, 100)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # beside the lines, never over them
    fig.suptitle("Sequential vs independent evaluation by period (like the paper's Fig. 9)")
    return fig


def skills_figure(b: Boards) -> Figure | None:
    if b.skills.empty:
        return None
    spent = not b.skills_by_tier.empty and float(b.skills_by_tier["tokens"].fillna(0).abs().sum()) > 0
    fig = Figure(figsize=(9.0 if spent else 7.5, 4.2), layout="constrained")
    rates = fig.add_subplot(1, 2 if spent else 1, 1)
    drawn: list = []
    for config, part in b.skills.groupby("config", sort=True):
        x = part["period_index"]
        plot_series(rates, x, 100 * part["induction_rate"], f"induction: {config}", drawn, marker="o")
        plot_series(rates, x, 100 * part["reuse_rate"], f"reuse: {config}", drawn, marker="s", ls="--")
    _period_axis(rates, b.skills["period_index"], "% of periods")
    rates.set_title("skill induction and reuse")
    title = "Skills by period (like the paper's Fig. 10)"
    if spent:
        tokens = fig.add_subplot(1, 2, 2)
        tiers = [t for t in b.taxonomy.tiers if t in set(b.skills_by_tier["tier"])]
        configs = sorted(b.skills_by_tier["config"].unique())
        width = 0.8 / max(1, len(configs))
        for j, config in enumerate(configs):
            part = b.skills_by_tier[b.skills_by_tier["config"] == config].set_index("tier")
            heights = [part["tokens"].get(t, 0) / 1000 for t in tiers]
            tokens.bar(np.arange(len(tiers)) + j * width, heights, width, label=f"tokens: {config}")
        tokens.set_xticks(np.arange(len(tiers)) + width * (len(configs) - 1) / 2, tiers)
        tokens.set_xlabel("scenario tier")
        tokens.set_ylabel("tokens / period (K)")
        tokens.set_title("tokens per period by tier")
    else:  # an empty panel says nothing: the title says why it is not drawn
        title += "; no tokens panel (the runs recorded no tokens)"
    fig.suptitle(title)
    fig.legend(loc="outside lower center", frameon=False)
    return fig


FIGURE_TITLES = {
    "timesage_by_period": "Overall score by period (like the paper's Fig. 7)",
    "timesage_seq_vs_ind": "Sequential vs independent evaluation (like the paper's Fig. 9)",
    "timesage_skills": "Skill induction and reuse by period (like the paper's Fig. 10), with tokens per period by "
    "tier where the runs spent tokens",
}


def attach(
    result: LeaderboardResult, rows: pd.DataFrame, datasets: list[str], with_paper: bool = False
) -> dict[str, pd.DataFrame]:
    """Add the boards of the `datasets` (those whose family names this board) to `result`; returns
    the CSV frames to write."""
    frames: dict[str, list[pd.DataFrame]] = {}
    for dataset in datasets:
        taxonomy = get_taskset(result.family(dataset)).taxonomy()
        b = boards(rows, result.runs, dataset, taxonomy, result.n_boot, result.seed)
        result.family_sections[dataset] = sections(b)
        suffix = f"-{dataset.split('/')[-1][:6]}" if len(result.datasets) > 1 else ""
        drawn = {
            "timesage_by_period": period_figure(b),
            "timesage_seq_vs_ind": seq_figure(b),
            "timesage_skills": skills_figure(b),
        }
        drawn = {name: render(fig) for name, fig in drawn.items() if fig is not None}
        result.figures.setdefault(dataset, {}).update(
            {f"{name}{suffix}": formats for name, formats in drawn.items() if formats is not None}
        )
        for name in ("axes", "families", "by_period", "seq_vs_ind", "skills", "tokens"):
            frames.setdefault(f"timesage_{name}.csv", []).append(getattr(b, name).assign(dataset=dataset))
    return {name: pd.concat(parts, ignore_index=True) for name, parts in frames.items()}
