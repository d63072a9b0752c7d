"""Figures fit for a paper, measured on the drawn figure: Fig. 4's labels inside its axes, its legend
inside the figure, no marker half under the frame, marks explained; safe file names; one build's
figures per folder."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.transforms import Bbox

from test_leaderboard import make_run, record
from tsbench.leaderboard import build_leaderboard
from tsbench.leaderboard.figures import (
    DPI,
    LEAST_TEXT_PX,
    SAME_AS,
    SHOWN_PX,
    STALE_LIST,
    curves_figure,
    heatmap_figure,
    marks_note,
    render,
    safe_name,
    sweep_stale,
)

LONG = "local/a-model-with-a-really-quite-long-name-for-a-legend"


def _curves(lengths: list[int]) -> pd.DataFrame:
    """Points on the frame (0 and 1) at both ends, n=1 and big n, three configurations."""
    rows = []
    for model, level in (("m-top", 1.0), ("m-bottom", 0.0), (LONG, 0.5)):
        for i, length in enumerate(lengths):
            rows.append(
                {"model": model, "harness": "rlm", "depth": 0, "length": length, "mean": level, "n": 1 if i else 40}
            )
    frame = pd.DataFrame(rows)
    return frame.assign(lo=frame["mean"] - 0.05, hi=frame["mean"] + 0.05)


def _name(config: tuple) -> str:
    label = f"{config[0]} · {config[1]} · depth {config[2]}"
    return label + (" †" if config[0] == LONG else "") + (" (reference: knows all)" if config[0] == "m-top" else "")


def _inside(inner: Bbox, outer: Bbox, slack: float = 0.5) -> bool:
    return (
        inner.x0 >= outer.x0 - slack
        and inner.y0 >= outer.y0 - slack
        and inner.x1 <= outer.x1 + slack
        and inner.y1 <= outer.y1 + slack
    )


@pytest.mark.parametrize("lengths", [[1024, 4096, 16384, 131072], [2048]])
def test_fig4_labels_inside_axes_legend_inside_figure_markers_whole(lengths):
    fig = curves_figure(_curves(lengths), _name, references={("m-top", "rlm", 0)})
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    frame = ax.get_window_extent(renderer)
    labels = [t for t in ax.texts if t.get_text().startswith("n=")]
    assert len(labels) == 3 * len(lengths)
    for text in labels:
        assert _inside(text.get_window_extent(renderer), frame), (text.get_text(), text.get_position())
    radius = (22**0.5 / 2) * fig.dpi / 72  # scatter size 22 pt^2
    points = [c for c in ax.collections if isinstance(c, PathCollection)]  # the scatter marks, not the bands
    assert sum(len(c.get_offsets()) for c in points) == 3 * len(lengths)
    for collection in points:
        for x, y in ax.transData.transform(collection.get_offsets()):
            assert frame.x0 <= x - radius and x + radius <= frame.x1 and frame.y0 <= y - radius <= frame.y1
    (legend,) = fig.legends
    assert _inside(legend.get_window_extent(renderer), fig.bbox)  # nothing of it is cut off
    title = legend.get_title().get_text()
    assert "† incomplete run" in title and "reference:" in title  # the marks the labels carry, explained


def test_marks_note_only_for_marks_present():
    assert marks_note(["m · rlm · depth 0"]) == ""
    assert marks_note(["m · rlm · depth 0 †"]).startswith("† incomplete run")


def test_safe_names_have_no_spaces_or_parentheses():
    assert safe_name("by_length-anomalyxl seed42 test (3f2a9c)") == "by_length-anomalyxl_seed42_test_3f2a9c"
    assert safe_name("a/b c") == "a_b_c" and safe_name("()") == "figure"


def test_a_rebuild_removes_its_stale_figures_and_nothing_else(tmp_path):
    """Two datasets give suffixed names; a later build on one leaves only its own figures."""
    key = "anomalyxl/seed42/test/3f2a9c" + "0" * 58
    runs = tmp_path / "runs"
    a = make_run(runs, "a", "m-a", [record(f"L{i}", "localize", 0.5, length=n) for i in range(3) for n in (1024, 2048)])
    b = make_run(runs, "b", "m-b", [record("L0", "localize", 0.3, length=n) for n in (1024, 2048)], dataset=key)
    out = tmp_path / "board"
    out.mkdir()
    (out / "mine.png").write_bytes(b"a user's file")
    (out / "by_length-from_before_the_list.png").write_bytes(b"an old build's figure")
    board = build_leaderboard([a, b], out, n_boot=20)
    names = {p.name for p in out.iterdir() if p.suffix in (".png", ".svg", ".pdf")}
    assert "by_length-anomalyxl_seed42_test_3f2a9c.png" in names
    assert not any(" " in n or "(" in n or ")" in n for n in names)
    # nothing proves an unlisted file ours, whatever its name: both stay (issue 44)
    assert "by_length-from_before_the_list.png" in names and "mine.png" in names
    names -= {"by_length-from_before_the_list.png"}
    md = (out / "leaderboard.md").read_text()
    assert "(by_length-anomalyxl_seed42_test_3f2a9c.png)" in md  # the page points at the files as written
    assert set((out / STALE_LIST).read_text().split()) == {n for n in names if n != "mine.png"}
    assert board.files
    # the same folder, now for one dataset: the suffixed figures of the earlier build go
    removed = sweep_stale(out, {"by_length.png"})
    assert {p.name for p in removed} == {n for n in names if n not in ("mine.png", "by_length.png")}
    assert (out / "mine.png").exists()
    # a listed figure the user replaced with their own bytes is theirs now: kept
    sweep_stale(out, {"by_length.png", "curves.png"})
    (out / "curves.png").write_bytes(b"the user's own figure")
    assert sweep_stale(out, {"by_length.png"}) == [] and (out / "curves.png").read_bytes() == b"the user's own figure"


def test_a_row_plot_without_an_anomaly_has_no_gold_window_entry(small_data, tmp_path, monkeypatch):
    """A localize row with no anomaly: no shaded window, so no legend entry claiming one."""
    import matplotlib.figure

    from tsbench.tasks.anomalyxl.figure import gold_windows, plot_row
    from tsbench.tasks.anomalyxl.rows import iter_rows

    rows = list(iter_rows(small_data / "test-precise.parquet"))
    empty = next(r for r in rows if not gold_windows(r))
    shaded = next(r for r in rows if gold_windows(r))
    legends: dict[str, list[str]] = {}
    saved = matplotlib.figure.Figure.savefig

    def spy(fig, *args, **kwargs):  # what the saved figure's legends say
        legends[current] = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        return saved(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    for current, row in (("empty", empty), ("shaded", shaded)):
        assert plot_row(row, tmp_path / f"{current}.png").stat().st_size > 0
    assert "gold window" not in legends["empty"] and "gold window" in legends["shaded"]


def test_timesage_by_period_ticks_are_periods_and_it_has_a_title():
    from types import SimpleNamespace

    from tsbench.leaderboard.timesage_render import period_figure

    one_period = pd.DataFrame(
        {"config": ["a · file-agent", "b · file-agent"], "period_index": [2, 2], "overall": [61.0, 80.0]}
    )
    svg = render(period_figure(SimpleNamespace(by_period=one_period)))["svg"].decode()
    assert "1.900" not in svg and "2.100" not in svg and ">2<" in svg  # the period itself, no fractional ticks
    assert "overall score by period" in svg and "0-100" in svg


def _labels_of(ax, renderer) -> list[Bbox]:
    return [t.get_window_extent(renderer) for t in ax.texts if t.get_text().startswith("n=")]


def test_fig4_dodges_equal_points_stacks_their_labels_and_says_when_no_band_is_drawn():
    """Three n=1 runs at one point: three markers side by side, three labels apart; no interval rests on
    n=1, so no band is drawn and the title says so (rather than promising bands)."""
    rows = [
        {"model": m, "harness": "rlm", "depth": 0, "length": length, "mean": 0.5, "n": 1, "lo": 0.5, "hi": 0.5}
        for m in ("a", "b", "c")
        for length in (1024, 4096)
    ]
    fig = curves_figure(pd.DataFrame(rows), _name)
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    assert "no 95 % bands" in ax.get_title() and "bands: 95 %" not in ax.get_title()
    xs = sorted(float(x) for c in ax.collections if isinstance(c, PathCollection) for x, _ in c.get_offsets())
    assert len(xs) == 6 and len(set(xs)) == 6  # dodged: no marker under another
    boxes = _labels_of(ax, renderer)
    assert len(boxes) == 6 and not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    banded = pd.DataFrame(rows).assign(n=40, lo=0.4, hi=0.6)
    fig = curves_figure(banded, _name)
    (ax,) = fig.axes
    assert "bands: 95 % bootstrap where n ≥ 10" in ax.get_title()
    assert any(type(c).__name__ in ("PolyCollection", "FillBetweenPolyCollection") for c in ax.collections)


def test_fig3_uses_a_colour_blind_safe_scale_and_marks_changes_from_few_rows():
    from tsbench.leaderboard.figures import heatmap_figure
    from tsbench.tasks import get_taskset

    by_length = pd.DataFrame(
        [
            {"model": "m", "harness": "rlm", "depth": 0, "category": "localize", "length": 1024, "n": 1, "mean": 0.2},
            {"model": "m", "harness": "rlm", "depth": 0, "category": "localize", "length": 4096, "n": 1, "mean": 0.772},
            {"model": "m", "harness": "rlm", "depth": 0, "category": "localize", "length": 16384, "n": 1, "mean": 0.3},
        ]
    ).assign(delta_pp=lambda f: (f["mean"] - 0.2) * 100)
    fig = heatmap_figure(by_length, get_taskset("anomalyxl").columns())
    texts = [t for ax in fig.axes for t in ax.texts]
    marked = [t for t in texts if t.get_text().endswith(" pp*")]
    assert [t.get_text() for t in marked] == ["+57.2 pp*", "+10.0 pp*"] and all(t.get_alpha() < 1 for t in marked)
    assert "not a measured change" in fig.get_supxlabel()
    maps = {im.get_cmap().name for ax in fig.axes for im in ax.get_images()}
    assert not {m for m in maps if "RdYlGn" in m or "RdGn" in m} and any("RdBu" in m for m in maps)


# -- every figure the boards write, checked as a reviewer reads it (issue 50) --------------------------


def _timesage_boards(tokens: float):
    """TimeSage board frames: two configurations whose skill curves coincide (one would hide the other),
    tokens per tier as given (0: a scripted policy, which spends none)."""
    from types import SimpleNamespace

    from tsbench.tasks.base import Taxonomy

    periods = [1, 2, 3, 4]
    configs = ["scripted/timesage · file-agent", "scripted/timesage · file-agent [skills]"]
    by_period = pd.DataFrame(
        [{"config": c, "period_index": p, "overall": 40.0 + 5 * p} for c in configs for p in periods]
    )  # equal lines: the second must say so
    seq = pd.DataFrame(
        [
            {"pair": configs[0], "period_index": p, "overall_independent": 40.0 + p, "overall_sequential": 42.0 + p}
            for p in periods
        ]
    )
    skills = pd.DataFrame(
        [
            {"config": c, "period_index": p, "induction_rate": 0.25 * (p > 1), "reuse_rate": 0.25 * (p > 2)}
            for c in configs
            for p in periods
        ]
    )
    tiers = ("easy", "medium", "hard")
    by_tier = pd.DataFrame([{"config": c, "tier": t, "tokens": tokens} for c in configs for t in tiers])
    taxonomy = Taxonomy(tiers=tiers)
    return SimpleNamespace(
        by_period=by_period, seq_vs_ind=seq, skills=skills, skills_by_tier=by_tier, taxonomy=taxonomy
    )


def _every_board_figure(tokens: float = 0.0) -> dict:
    from tsbench.leaderboard.timesage_render import period_figure, seq_figure, skills_figure
    from tsbench.tasks import get_taskset

    b = _timesage_boards(tokens)
    by_length = pd.DataFrame(
        [
            {"model": m, "harness": "rlm", "depth": 0, "category": "localize", "length": L, "n": 12, "mean": v}
            for m, v in (("a", 0.4), ("b", 0.6))
            for L in (1024, 4096)
        ]
    ).assign(delta_pp=lambda f: (f["mean"] - 0.5) * 10)
    return {
        "by_length": heatmap_figure(by_length, get_taskset("anomalyxl").columns()),
        "accuracy_vs_length": curves_figure(_curves([1024, 4096, 16384]), _name),
        "timesage_by_period": period_figure(b),
        "timesage_seq_vs_ind": seq_figure(b),
        "timesage_skills": skills_figure(b),
    }


def _drawn(ax) -> bool:
    """Whether an axes shows data: a line with finite values, a bar of some height, an image, a band."""
    lines = any(np.isfinite(np.asarray(line.get_ydata(), dtype=float)).any() for line in ax.get_lines())
    bars = any(abs(p.get_height()) > 0 for p in ax.patches if hasattr(p, "get_height"))
    return lines or bars or bool(ax.get_images()) or bool(ax.collections)


def test_every_board_figure_has_titles_labels_data_marked_overlaps_and_legible_text():
    from matplotlib.image import imread

    from tsbench.leaderboard.sections import FIGURE_TITLES

    figures = _every_board_figure()
    assert set(figures) == set(FIGURE_TITLES)  # every figure a board writes, none left out
    for name, fig in figures.items():
        png = render(fig)["png"]  # as written: text raised to the legible floor first
        width_px = imread(__import__("io").BytesIO(png)).shape[1]
        scale = min(1.0, SHOWN_PX / width_px)
        assert fig.get_suptitle() or all(ax.get_title() for ax in fig.axes if ax.get_label() != "<colorbar>"), name
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                continue
            assert ax.get_xlabel() and ax.get_ylabel(), (name, ax.get_title(), "axis labels")
            assert _drawn(ax), (name, "an empty panel")
            lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
            for i, line in enumerate(lines):
                for earlier in lines[:i]:
                    same = np.array_equal(line.get_xydata(), earlier.get_xydata())
                    assert not same or SAME_AS in line.get_label(), (name, line.get_label(), "hidden silently")
        small = [
            (t.get_text(), t.get_fontsize())
            for t in fig.findobj(lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text"))
            if t.get_text() and t.get_visible() and t.get_fontsize() * DPI / 72 * scale < LEAST_TEXT_PX - 0.05
        ]
        assert not small, (name, width_px, small[:5])


def test_coincident_series_say_so_and_the_skills_figure_draws_tokens_only_when_spent():
    figures = _every_board_figure(tokens=0.0)
    labels = [line.get_label() for line in figures["timesage_by_period"].axes[0].get_lines()]
    assert sum(SAME_AS in label for label in labels) == 1, labels
    skills = figures["timesage_skills"]
    assert len(skills.axes) == 1 and "no tokens panel" in skills.get_suptitle()
    spent = _every_board_figure(tokens=1500.0)["timesage_skills"]
    assert len(spent.axes) == 2 and "tokens" in spent.axes[1].get_ylabel()
    assert spent.legends and not spent.axes[0].get_legend()  # the legend sits below the panels, not over lines


def test_alt_text_promises_nothing_the_figure_does_not_draw():
    from tsbench.leaderboard.sections import figure_title

    no_band = curves_figure(_curves([1024, 4096]).assign(n=1), _name)
    drawn = any(
        type(c).__name__ in ("PolyCollection", "FillBetweenPolyCollection") for c in no_band.axes[0].collections
    )
    alt = figure_title("accuracy_vs_length")
    assert not drawn and "no 95 % bands" in no_band.axes[0].get_title()
    assert "only where" in alt and "bands," not in alt  # bands are conditional, as drawn
    assert "where the runs spent tokens" in figure_title("timesage_skills")
