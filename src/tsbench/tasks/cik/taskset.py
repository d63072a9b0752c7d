"""Context-is-Key as a TaskFamily (TimeClaw paper §4.1, Table 1): context-aided probabilistic forecasting.

`tsbench generate --family cik --path DIR` reads the published instances (reader.py) and writes
`train.parquet` and `test.parquet` split as TimeClaw splits them (Table 11: half of each task's
instances to train, rounded up, at least one, split seed 2026: 213 + 142), or one split with
--split. A row's series is the history (every past_time column; the target is the last; a missing
value stays NaN), its meta the timestamps and the context, its gold the target, region of interest,
constraints, scaling, task weight and how the answer is read (`answer_format`, `parser`: answer.py;
`--option answer_format=samples`, `--option parser=strict|timeclaw-repo` at generate time). The
row's metrics are CiK's RCRPS and its parts and sMAPE in percent (metrics.py); its score in [0, 1]
is 1 / (1 + RCRPS). Tables report CiK's aggregate: RCRPS capped at 5, weighted by task weight, an
unusable answer at 5 (lower is better).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.tasks.base import Aggregate, Column, Scored
from tsbench.tasks.cik import reader
from tsbench.tasks.cik.answer import ANSWER_FORMATS, LEGACY_FORMAT, PARSERS, answer_format, parse_forecast
from tsbench.tasks.cik.metrics import RCRPS_CAP, Constraints, rcrps, smape, smape_eq65
from tsbench.tasks.recordings.family import RecordingFamily, write_train_test
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sources import refuse_unknown, source_path

INLINE_ROWS = 3000  # history rows written into the question (CiK's prompt lists the whole history)
OPTIONS = ("path", "seed", "split", "answer_format", "parser")
RCRPS_AGGREGATE = Aggregate(
    weight="weight",
    cap=RCRPS_CAP,
    unusable=RCRPS_CAP,
    lower_is_better=True,
    protocol="CiK's aggregate: RCRPS capped at 5, weighted by task weight, an unusable answer at 5, NaN if one is NaN",
    nan_propagates=True,  # as CiK's compute_all_rcprs: NaN >= 5 is false, so a NaN is summed
)


def _iso(stamp: pd.Timestamp) -> str:
    return pd.Timestamp(stamp).isoformat()


def question_text(instance: reader.Instance, kind: str = "quantiles") -> str:
    """CiK's direct prompt, in substance: the context, the history as (timestamp, values), the
    timestamps to forecast and the answer format."""
    context = [
        f"Background: {instance.background}" if instance.background else "",
        f"Scenario: {instance.scenario}" if instance.scenario else "",
        f"Constraints: {instance.constraints_text}" if instance.constraints_text else "",
    ]
    shown = "\n".join(c for c in context if c) or "(no context)"
    header = "timestamp, " + ", ".join(instance.columns)
    lines = [
        f"({_iso(t)}, " + ", ".join(f"{v:.6g}" for v in instance.history[:, i]) + ")"
        for i, t in enumerate(instance.times[-INLINE_ROWS:], start=max(0, len(instance.times) - INLINE_ROWS))
    ]
    future = ", ".join(_iso(t) for t in instance.future_times)
    target = instance.columns[-1]
    return (
        f"<context>\n{shown}\n</context>\n\n<history>\n{header}\n" + "\n".join(lines) + "\n</history>\n\n"
        f"Forecast {target} (the last column; the workspace channel {target!r}) at these "
        f"{len(instance.future_times)} timestamps: {future}\n\n{answer_format(len(instance.future_times), kind)}"
    )


def memory_descriptor(instance: reader.Instance) -> str:
    """Appendix C's c_tau for CiK: background, scenario and constraints, in that order."""
    return "\n".join(f for f in (instance.background, instance.scenario, instance.constraints_text) if f)


def to_row(
    instance: reader.Instance, split: str, seed: int, *, kind: str = "quantiles", parser: str = "timeclaw"
) -> Row:
    times_s = [pd.Timestamp(t).value / 1e9 for t in instance.times]
    gold = {
        "answer": instance.name,
        "target": [float(v) for v in instance.target],
        "region_of_interest": list(instance.region_of_interest),
        "scaling": instance.scaling,
        "constraints": {
            "minimum": instance.constraints.minimum,
            "maximum": instance.constraints.maximum,
            "variable_max_index": list(instance.constraints.variable_max_index),
            "variable_max_values": list(instance.constraints.variable_max_values),
        },
        "weight": instance.weight,
        "answer_format": kind,
        "parser": parser,
    }
    meta = {
        "timestamps": [_iso(t) for t in instance.times],
        "time_s": times_s,
        "forecast_timestamps": [_iso(t) for t in instance.future_times],
        "horizon": len(instance.future_times),
        "target_channel": instance.columns[-1],
        "task_name": instance.name,
        "memory_descriptor": memory_descriptor(instance),
    }
    source = {
        "task_name": instance.name,
        "instance_seed": instance.seed,
        "domain": instance.domain,
        "context_types": ",".join(instance.timeclaw_context_types),  # what the boards break RCRPS down by
        "context_types_cik": ",".join(instance.context_types),
        "weight": instance.weight,
    }
    return Row(
        id=instance.key,
        split=split,
        category=instance.domain,
        regime="context",
        channel_names=list(instance.columns),
        question=question_text(instance, kind),
        options=[],
        gold=gold,
        seed=seed,
        values=instance.history.astype(np.float32),
        meta=meta,
        source=source,
    )


def _constraints(gold: dict[str, Any]) -> Constraints:
    limits = gold.get("constraints") or {}
    return Constraints(
        minimum=limits.get("minimum"),
        maximum=limits.get("maximum"),
        variable_max_index=tuple(limits.get("variable_max_index") or ()),
        variable_max_values=tuple(limits.get("variable_max_values") or ()),
    )


def score_forecast(gold: dict[str, Any], message: str) -> Scored:
    """RCRPS and sMAPE of the message's forecast against the gold (pure). An unusable answer scores 0
    with no RCRPS or sMAPE: the tables count it at CiK's cap (5) and TimeClaw's sMAPE bound (200)."""
    target = np.asarray(gold["target"], dtype=np.float64)
    forecast, why = parse_forecast(
        message,
        len(target),
        answer_format=gold.get("answer_format", LEGACY_FORMAT),
        parser=gold.get("parser", "timeclaw"),
    )
    if forecast is None:
        return Scored(0.0, False, None, why, {"rcrps": None, "smape": None})
    result = rcrps(
        target,
        forecast.members,
        scaling=float(gold["scaling"]),
        region_of_interest=gold.get("region_of_interest") or None,
        constraints=_constraints(gold),
    )
    metrics = {
        "rcrps": result.rcrps,
        "crps": result.crps,
        "roi_crps": result.roi_crps,
        "non_roi_crps": result.non_roi_crps,
        "violation_crps": result.violation_crps,
        "smape": smape(target, forecast.point),
        "smape_eq65": smape_eq65(target, forecast.point),
        "n_samples": float(len(forecast.members)),
    }
    reading = forecast.reading
    parsed = {
        "kind": reading.kind,
        "n_members": len(forecast.members),
        "point": [round(float(v), 6) for v in forecast.point],
        **({"levels": reading.levels} if reading.levels is not None else {}),
        **({"note": reading.note} if reading.note else {}),
    }
    if np.isnan(result.rcrps):  # CiK's RCRPS is NaN (metric_scaling 0, an inf sample): the aggregate is NaN
        parsed["note"] = "CiK's RCRPS is NaN here (metric_scaling 0 or a non-finite sample): the RCRPS aggregate is NaN"
        return Scored(0.0, True, parsed, None, metrics)
    return Scored(1.0 / (1.0 + result.rcrps), True, parsed, None, metrics)


class CiK(RecordingFamily):
    name = "cik"
    dataset = "Context-is-Key (ServiceNow, 71 context-aided forecasting tasks)"
    default_root_dir = "data/cik"
    strata = ("stratum",)  # the CiK task name: --limit draws evenly over tasks
    boards = ("cik",)  # TimeClaw Table 1's layout (leaderboard/cik.py)

    def score(self, category: str, gold: Any, message: str) -> Scored:
        return score_forecast(gold, message)

    def columns(self) -> list[Column]:
        return [
            Column(d, d, "RCRPS", "RCRPS by domain", mean_metric="rcrps", aggregate=RCRPS_AGGREGATE)
            for d in reader.DOMAINS
        ]

    def sft_target(self, category: str, gold: Any) -> str:
        return json.dumps({"forecast": gold["target"]})

    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required: the published instances), seed, split (train | test; default both),
        answer_format (quantiles | samples), parser (timeclaw | timeclaw-repo | strict)."""
        refuse_unknown(options, OPTIONS, self.name)
        kind = str(options.get("answer_format") or "quantiles")
        parser = str(options.get("parser") or "timeclaw")
        if kind not in ANSWER_FORMATS or parser not in PARSERS:
            raise UserError(
                f"--family cik: answer_format is one of {', '.join(ANSWER_FORMATS)} and parser one of "
                f"{', '.join(PARSERS)} (got {kind!r}, {parser!r})"
            )
        path = source_path(options, self.name, reader.SOURCE_HINT)
        folder = UserFolder(path, self.name)
        instances = reader.read_instances(folder)
        if not instances:
            raise UserError(f"no CiK instances under {path}")
        train, test = reader.split_instances(instances)
        return write_train_test(
            self,
            train,
            test,
            functools.partial(to_row, kind=kind, parser=parser),
            out,
            options=options,
            folder=folder,
            config={"path": str(path), "split": "timeclaw", "answer_format": kind, "parser": parser},
            progress=progress,
        )
