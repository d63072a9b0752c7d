"""Calibration of the four decision constants, run once on the train split (never on test)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tsbench.baselines import decode
from tsbench.baselines.detector.answers import analyse, decide
from tsbench.baselines.detector.model import DEFAULT, ChannelResult, Settings
from tsbench.tasks.anomalyxl import labels as lb


@dataclass
class Analysed:
    """One precise row with its channels analysed: what `fit_settings` searches over."""

    category: str
    length: int
    names: list[str]
    gold: dict
    results: list[ChannelResult]


def _mean_score(rows: list[Analysed], settings: Settings) -> float:
    from tsbench.tasks.anomalyxl.metrics import score

    values = [
        score(r.category, r.gold, decode.answer_text(decide(r.category, r.length, r.names, [], r.results, settings)))
        for r in rows
    ]
    return float(np.mean(values)) if values else 0.0


def fit_settings(rows: list[Analysed]) -> Settings:
    """Grid search of the four constants, each on the category it governs: kind penalties on
    classify-with-evidence, the presence offset on localize, the channel offset on all-channels."""
    by_category: dict[str, list[Analysed]] = {}
    for r in rows:
        by_category.setdefault(r.category, []).append(r)
    settings = DEFAULT
    offsets = [float(v) for v in np.arange(-4.0, 24.5, 0.5)]
    grid = {  # each constant: the category it governs, the values tried
        "seasonality_penalty": (lb.CLASSIFY, [0.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0]),
        "variance_penalty": (lb.CLASSIFY, [-4.0, -2.0, 0.0, 2.0, 4.0, 8.0]),
        "presence_offset": (lb.LOCALIZE, offsets),
        "channel_offset": (lb.ALL_CHANNELS, offsets),
    }
    from dataclasses import replace

    for name, (category, values) in grid.items():
        subset = by_category.get(category, [])
        if not subset:
            continue
        scored = [
            (_mean_score(subset, replace(settings, **{name: v})), -abs(v - getattr(DEFAULT, name)), v) for v in values
        ]
        settings = replace(settings, **{name: max(scored)[2]})
    return settings


def _analyse_row(item):
    category, length, names, gold, values = item
    return Analysed(category, length, names, gold, analyse(category, list(values)))


def calibrate(path, *, workers: int = 2, limit: int | None = None) -> Settings:
    """Analyse the precise rows of a (train) split file and fit the Settings on them."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from tsbench.tasks.anomalyxl.rows import iter_rows

    def items():
        for i, row in enumerate(iter_rows(path)):
            if limit is not None and i >= limit:
                return
            yield row.category, row.length, row.channel_names, row.gold, row.values

    if workers <= 1:
        rows = [_analyse_row(item) for item in items()]
    else:
        rows = []
        batch: list = []
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            for item in items():  # a few rows in flight at a time, not the whole split in memory
                batch.append(item)
                if len(batch) == 4 * workers:
                    rows.extend(pool.map(_analyse_row, batch))
                    batch = []
            rows.extend(pool.map(_analyse_row, batch))
    return fit_settings(rows)
