"""The secondary sections as (header, rows) of text, so Markdown and HTML show identical numbers."""

from __future__ import annotations

from .columns import is_choice, order, short_name
from .compare import fmt_p
from .result import DASH, SMALL_N_MARK, LeaderboardResult, fmt, fmt_ci, fmt_count, fmt_dollars
from .tables import SMALL_N
from .timesage_render import FIGURE_TITLES as TIMESAGE_FIGURE_TITLES


def pct(value) -> str:
    return DASH if value is None or value != value else f"{100 * value:.1f} %"


def _interval(lo, hi, n) -> str:
    text = fmt_ci(lo, hi)
    return text + SMALL_N_MARK if text and n < SMALL_N else text


COST_INTRO = (
    "Means per row; forced-final rate over finished rows; dollars where known. Valid / invalid / cut / errors "
    "say why a score is what it is: invalid and cut rows score 0 (no usable answer, or a reply stopped by the "
    "token cap), error rows are never scored."
)


def cost_section(result: LeaderboardResult, dataset: str) -> tuple[list[str], list[list]]:
    part = result.costs[result.costs["dataset"] == dataset]
    header = [
        "Model",
        "Harness",
        "Depth",
        "Rows",
        "Valid / invalid / cut / errors",
        "Turns",
        "Code cells",
        "Sub-calls",
        "Tokens in",
        "Tokens out",
        "Sub-call tokens",
        "Forced final",
        "Errors",
        "$ total",
        "$ / row",
        "Server token counts",
    ]
    rows = []
    incomplete = result.incomplete_configs(dataset)
    for r in part.itertuples(index=False):
        model = f"{r.model} †" if (r.model, r.harness, r.depth) in incomplete else r.model
        rows.append(
            [
                model,
                r.harness,
                r.depth,
                r.rows,
                f"{r.valid} / {r.invalid} / {r.cut} / {r.errors}",
                fmt_count(r.turns),
                fmt_count(r.code_cells),
                fmt_count(r.sub_calls, 2),
                fmt_count(r.input_tokens),
                fmt_count(r.output_tokens),
                fmt_count(r.sub_call_tokens),
                pct(r.forced_final_rate),
                pct(r.error_rate),
                fmt_dollars(r.cost_usd, r.cost_known, r.rows),
                DASH if r.cost_known == 0 else f"{r.cost_per_row_usd:.5f}",
                "valid" if not r.tokens_estimated else f"invalid on {r.tokens_estimated} row(s): tokens estimated",
            ]
        )
    return header, rows


def length_section(result: LeaderboardResult, dataset: str) -> tuple[list[str], list[list]]:
    """Fig. 3 as a table: one line per (configuration, category), one column per length."""
    part = result.by_length[result.by_length["dataset"] == dataset]
    lengths = sorted(part["length"].unique())
    columns = result.columns.get(dataset, [])
    ranks = order(columns)
    keyed = []
    for (model, harness, depth, category), group in part.groupby(["model", "harness", "depth", "category"], sort=True):
        at = {int(r.length): f"{r.mean:.3f} ({r.delta_pp:+.1f} pp, n={r.n})" for r in group.itertuples(index=False)}
        label = result.config_name(dataset, (model, harness, depth))
        keyed.append(
            (
                (label, ranks.get(category, 99)),
                [label, short_name(columns, category), *(at.get(int(x), DASH) for x in lengths)],
            )
        )
    keyed.sort(key=lambda item: item[0])
    return ["Configuration", "Category", *(f"L={x}" for x in lengths)], [row for _, row in keyed]


# Fig. 4 averages only the precise categories run at every length of a configuration.
NO_CURVE = (
    "No precise category was run at every length of a configuration (--limit N gives each category "
    "at most N lengths: use N >= the number of lengths for this figure)."
)


def curve_section(result: LeaderboardResult, dataset: str) -> tuple[list[str], list[list]]:
    """Fig. 4 as a table: one line per configuration, one column per length."""
    part = result.curves[result.curves["dataset"] == dataset]
    lengths = sorted(part["length"].unique())
    rows = []
    for config, group in part.groupby(["model", "harness", "depth"], sort=True):
        at = {
            int(r.length): f"{r.mean:.3f} {_interval(r.lo, r.hi, r.n)} n={r.n}".replace("  ", " ")
            for r in group.itertuples(index=False)
        }
        rows.append(
            [
                result.config_name(dataset, config),
                group["categories"].iloc[0].replace(",", ", "),
                *(at.get(int(x), DASH) for x in lengths),
            ]
        )
    return ["Configuration", "Categories averaged", *(f"L={x} (mean, 95 % CI, n)" for x in lengths)], rows


def paired_section(result: LeaderboardResult, dataset: str) -> tuple[list[str], list[list]]:
    part = result.paired[result.paired["dataset"] == dataset]
    columns = result.columns.get(dataset, [])
    rows = [
        [
            r.a,
            r.b,
            short_name(columns, r.category),
            r.n,
            fmt(r.mean_a),
            fmt(r.mean_b),
            f"{r.diff:+.3f}",
            fmt_ci(r.lo, r.hi, 3),
            "yes" if r.excludes_zero else "no",
            r.test,
            fmt_p(r.p_holm, bare=True),
            DASH if r.rows_needed is None or r.rows_needed != r.rows_needed else int(r.rows_needed),
        ]
        for r in part.itertuples(index=False)
    ]
    header = ["a", "b", "Category", "Shared rows", "Mean a", "Mean b", "a − b", "95 % CI", "CI excludes 0"]
    return [*header, "Test", "p (Holm)", "Rows for 80 % power"], rows


PAIRED_INTRO = (
    "Difference of means (a − b) over the (id, epoch) rows both scored, with a paired bootstrap 95 % interval; "
    "p from McNemar's exact test where scores are 0/1, else a paired permutation test, Holm-corrected across the "
    "pair's categories; rows for 80 % power = ((z₀.₉₇₅ + z₀.₈) · sd(a − b) / |a − b|)², the paired rows a "
    "replication needs to detect a true difference this large (as `tsbench compare`)."
)


def failure_section(result: LeaderboardResult, dataset: str) -> tuple[list[str], list[list]]:
    part = result.failures[result.failures["dataset"] == dataset]
    rows = [
        [result.config_name(dataset, (r.model, r.harness, r.depth)), r.cause, r.count, pct(r.share), r.example or DASH]
        for r in part.itertuples(index=False)
    ]
    return ["Configuration", "Cause", "Rows", "Share", "First example"], rows


def paper_section(result: LeaderboardResult) -> tuple[list[str], list[list]]:
    columns = result.paper_columns
    header = ["Section", "Model", *(f"{c.short} ({'F1' if is_choice(c) else c.metric})" for c in columns)]
    rows = [["Samples", "", *(f"({result.paper_counts[c.category]})" for c in columns)]]
    rows += [[r["section"], r["model"], *(r[c.category] for c in columns)] for _, r in result.paper.iterrows()]
    return header, rows


FIGURE_TITLES = {
    "by_length": "Per-length breakdown (like the paper's Fig. 3): mean score and n per cell; change in "
    "percentage points from the category's shortest L",
    "accuracy_vs_length": "Score versus context length (like the paper's Fig. 4), n per point; a 95 % bootstrap "
    "band only where a point rests on enough rows (the figure's title says whether any does)",
    **TIMESAGE_FIGURE_TITLES,
}


FIGURES = None  # where a dataset's figures go among its sections
LENGTH_INTRO = (
    "Mean score per category and length L, with the change in percentage points from that category's shortest L "
    "(the paper's Fig. 3)."
)
CURVE_INTRO = "Mean over the precise categories run at every length (the paper's Fig. 4)."
FAILURES_INTRO = "Rows that errored (no score) or finished without a usable answer, by cause."
NO_FAILURES = "No errors and no unparseable answers."


def dataset_sections(result: LeaderboardResult, dataset: str) -> list[tuple[str, str, tuple, str] | None]:
    """(title, intro, (header, rows), text shown when there are no rows) of each section after Table 1, in the
    order every renderer shows them; FIGURES marks where the figures go."""
    failures = ("Failures", FAILURES_INTRO, failure_section(result, dataset), NO_FAILURES)
    if dataset in result.family_sections:  # a family with its own boards (TimeSage)
        own = [(title, intro, table, "No rows.") for title, intro, table in result.family_sections[dataset]]
        return [*own, FIGURES, failures]
    return [
        ("Cost", COST_INTRO, cost_section(result, dataset), "No rows."),
        FIGURES,
        ("Per-length breakdown (Fig. 3)", LENGTH_INTRO, length_section(result, dataset), "No scored rows."),
        ("Score versus length (Fig. 4)", CURVE_INTRO, curve_section(result, dataset), NO_CURVE),
        (
            "Paired comparisons",
            PAIRED_INTRO,
            paired_section(result, dataset),
            "No two configurations share scored rows.",
        ),
        failures,
    ]


def figure_title(name: str) -> str:
    return next((title for prefix, title in FIGURE_TITLES.items() if name.startswith(prefix)), name)
