"""results.json's `tasks` block, keyed by task as lm-eval's `results` is: `<family>/<category>` per
column and `<family>` overall, each with the paper's metric for it (macro-F1 and accuracy for a
multiple choice, the column's own mean metric such as IoU where it has one, aggregated by the
benchmark's own protocol where the column names one, e.g. CiK's weighted, capped RCRPS, else the
mean score), its standard error, n and errors. The family's overall entry carries that metric too
when every column shares it. The leaderboard recomputes these with intervals; this is the summary
other tools read without tsbench.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from tsbench.core.provenance import write_json
from tsbench.core.stats import macro_f1
from tsbench.results import RESULTS_JSON, results_json
from tsbench.results.summary import summarize
from tsbench.tasks.base import Column


def _option(text: Any, *, gold: bool) -> str:
    """The option text of a gold ({"answer": option}) or a parsed answer; "" when there is none."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return str(text) if gold else ""
    if isinstance(value, dict):
        value = value.get("answer")
    return value if isinstance(value, str) else ("" if value is None or not gold else str(value))


def _as_dict(metrics: Any) -> dict:
    """A row's metrics: a dict, or the (key, value) pairs parquet's map type reads back as."""
    if isinstance(metrics, dict):
        return metrics
    try:
        return dict(metrics) if metrics is not None else {}
    except (TypeError, ValueError):
        return {}


def _mean_and_stderr(values: pd.Series) -> tuple[float | None, float | None]:
    scores = values.dropna().astype(float)
    n = len(scores)
    if not n:
        return None, None
    return float(scores.mean()), float(scores.std(ddof=1) / math.sqrt(n)) if n > 1 else None


def _task(group: pd.DataFrame, column: Column | None) -> dict[str, Any]:
    scored = group[group["error_type"].isna() & group["score"].notna()]
    score, stderr = _mean_and_stderr(scored["score"])
    out: dict[str, Any] = {"n": len(scored), "errors": int(group["error_type"].notna().sum())}
    out.update(score=score, score_stderr=stderr, primary="score")
    if column is None or scored.empty:
        return out
    if column.options is not None:
        golds = [_option(g, gold=True) for g in scored["gold"]]
        preds = [_option(p, gold=False) for p in scored["parsed_answer"]]
        options = list(column.options) or None  # no fixed list: options differ by row
        out.update(accuracy=score, macro_f1=macro_f1(golds, preds, options=options), primary="macro_f1")
    elif column.mean_metric and column.aggregate is not None:
        attributes = scored["attributes"] if "attributes" in scored else [None] * len(scored)
        values, weights = column.aggregate.inputs(scored["metrics"], attributes, column.mean_metric)
        out.update({column.mean_metric: column.aggregate.value(values, weights), f"{column.mean_metric}_stderr": None})
        counted = [v for v in column.aggregate.filled(values) if v is not None]
        out[f"{column.mean_metric}_n"] = len(counted)  # rows it counts (an unusable answer counts at the cap)
        out.update(primary=column.mean_metric, protocol=column.aggregate.protocol)
        out["lower_is_better"] = column.aggregate.lower_is_better
    elif column.mean_metric:
        values = scored["metrics"].map(lambda m: _as_dict(m).get(column.mean_metric))
        metric, metric_stderr = _mean_and_stderr(values)
        out.update({column.mean_metric: metric, f"{column.mean_metric}_stderr": metric_stderr})
        out[f"{column.mean_metric}_n"] = int(values.notna().sum())  # rows it counts; n - this: rows it leaves out
        out["primary"] = column.mean_metric
    out["metric"] = column.metric
    return out


def task_results(samples: pd.DataFrame, family: str, columns: list[Column]) -> dict[str, dict[str, Any]]:
    """{"<family>/<category>": metrics, ..., "<family>": the overall mean score} in table order."""
    by_category = {c.category: c for c in columns}
    order = [c.category for c in columns]
    seen = list(samples["category"].dropna().unique())
    categories = [c for c in order if c in seen] + sorted(set(seen) - set(order))
    tasks = {f"{family}/{c}": _task(samples[samples["category"] == c], by_category.get(c)) for c in categories}
    tasks[family] = _task(samples, _shared(columns))
    return tasks


def _shared(columns: list[Column]) -> Column | None:
    """The one aggregated metric every category of the family reports alike (CiK's RCRPS), as the
    overall's; None for a family without one (its overall stays the mean score)."""
    kinds = {(c.mean_metric, c.aggregate, c.metric) for c in columns if c.options is None}
    if len(kinds) != 1 or any(c.options is not None for c in columns):
        return None
    metric, aggregate, label = kinds.pop()
    if not metric or aggregate is None:
        return None
    return Column("overall", "overall", label, "overall", mean_metric=metric, aggregate=aggregate)


def write_results(out: Path, info: dict, samples: pd.DataFrame, taskset: Any, **fields) -> dict:
    """The run dir's results.json from the rows it counts; `fields` go in as given."""
    summary = summarize(samples, [c.category for c in taskset.columns()])
    tasks = task_results(samples, info.get("family") or taskset.name, list(taskset.columns()))
    results = results_json.build(info, summary, tasks, **fields)
    write_json(out / RESULTS_JSON, results)
    return results
