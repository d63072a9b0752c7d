"""A tsbench run as an inspect_ai eval log, so `inspect view` opens it.

Each (id, epoch) row becomes an EvalSample: the transcript as chat messages, the final message as
the output, our score (with the parsed answer and secondary metrics) under the scorer `tsbench_score`,
token usage and cost per sample and in total. An error row keeps its error and gets no score, as
in our tables (an error is never a 0). Epochs are 1-based in inspect, 0-based here.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalPlanStep,
    EvalResults,
    EvalRevision,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import ModelOutput, ModelUsage
from inspect_ai.scorer import Score

from tsbench import __version__
from tsbench.interop.inspect_messages import first_user_text, to_messages
from tsbench.interop.public_gold import public_gold
from tsbench.interop.source import RunSource, is_error_row, transcript_of
from tsbench.results import results_json

SCORER = "tsbench_score"  # the scorer's name in `inspect eval tsbench/...` logs too


def _stable_id(*parts: Any) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:22]


def _iso(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "isoformat"):
        if getattr(value, "tzinfo", None) is None:
            value = value.replace(tzinfo=UTC)
        return value.isoformat()
    text = str(value)
    return text if text and text != "NaT" else None


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _usage(input_tokens: Any, output_tokens: Any, cost: Any) -> ModelUsage:
    tokens_in, tokens_out = int(input_tokens or 0), int(output_tokens or 0)
    return ModelUsage(
        input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=tokens_in + tokens_out, total_cost=_number(cost)
    )


def _sample(row: dict, model: str) -> EvalSample:
    events = transcript_of(row)
    failed = is_error_row(row)
    metadata = {
        key: row.get(key)
        for key in (
            "family",
            "split",
            "regime",
            "category",
            "length",
            "n_channels",
            "harness",
            "depth",
            "turns",
            "code_cells",
            "sub_calls",
            "forced_final",
            "latency_s",
        )
    }
    metadata.update(attributes=dict(row.get("attributes") or {}), tsbench_epoch=int(row["epoch"]))
    scores = None
    if not failed and _number(row.get("score")) is not None:
        scores = {
            SCORER: Score(
                value=float(row["score"]),
                answer=row.get("parsed_answer"),
                explanation=row.get("answer_error"),
                metadata={"valid": bool(row.get("valid")), **dict(row.get("metrics") or {})},
            )
        }
    usage = {model: _usage(row.get("input_tokens"), row.get("output_tokens"), row.get("cost_usd"))}
    output = ModelOutput.from_content(model, str(row.get("final_message") or ""))
    output.usage = usage[model]
    error = None
    if failed:
        error = EvalError(
            message=f"{row['error_type']}: {row.get('error') or ''}",
            traceback=str(row.get("error") or ""),
            traceback_ansi="",
        )
    return EvalSample(
        id=str(row["id"]),
        epoch=int(row["epoch"]) + 1,
        input=first_user_text(events),
        target=public_gold(str(row.get("gold") or "")),
        messages=to_messages(events, model),
        output=output,
        scores=scores,
        metadata=metadata,
        model_usage=usage,
        total_time=_number(row.get("latency_s")),
        completed_at=_iso(row.get("finished_at")),
        error=error,
    )


def _metrics(block: dict) -> dict[str, EvalMetric]:
    values = {"mean": block.get("mean"), "stderr": block.get("stderr")}
    if block.get("ci95"):
        values.update(ci95_low=block["ci95"][0], ci95_high=block["ci95"][1])
    values.update(valid_rate=block.get("valid_rate"))
    return {k: EvalMetric(name=k, value=float(v)) for k, v in values.items() if v is not None}


def _results(source: RunSource) -> EvalResults:
    summary = results_json.summary_of(source.results) or {}
    overall = summary.get("overall") or {}
    metrics = _metrics(overall)
    for block in summary.get("categories", []):  # as inspect's grouped(mean(), "category") names them
        if block.get("mean") is not None:
            metrics[block["category"]] = EvalMetric(name=block["category"], group="grouped", value=float(block["mean"]))
    scores = [
        EvalScore(
            name=SCORER,
            scorer=SCORER,
            scored_samples=overall.get("n"),
            unscored_samples=overall.get("errors"),
            metrics=metrics,
        )
    ]
    rows = len(source.samples)
    errors = int(source.samples["error_type"].notna().sum()) if rows else 0
    return EvalResults(total_samples=rows, completed_samples=rows - errors, scores=scores)


def build_eval_log(source: RunSource) -> EvalLog:
    run, samples = source.run, source.samples
    model = source.model if "/" in source.model else f"openai/{source.model}"  # inspect's provider/name
    rows = source.rows()
    dataset = run.get("dataset") or {}
    ids = sorted({str(r["id"]) for r in rows})
    created = run.get("created_at") or datetime.now(UTC).isoformat()
    harness_config = {k: v for k, v in (run.get("config") or {}).items() if v is not None}
    spec = EvalSpec(
        eval_id=_stable_id("eval", source.name, created),
        run_id=_stable_id("run", source.name, created),
        created=created,
        task=f"tsbench/{source.family}",
        task_id=_stable_id("task", source.family, dataset.get("key")),
        task_args={"harness": run.get("harness"), "depth": run.get("depth")},
        solver=f"tsbench/{run.get('harness')}",
        dataset=EvalDataset(
            name=str(dataset.get("key") or source.family),
            location=str((dataset.get("paths") or [""])[0]),
            samples=len(ids),
            sample_ids=ids,
        ),
        model=model,
        config=EvalConfig(epochs=max((int(r["epoch"]) for r in rows), default=0) + 1),
        revision=EvalRevision(type="git", origin="", commit=str(run["git_commit"])) if run.get("git_commit") else None,
        packages={"tsbench": __version__},
        metadata={
            "tsbench_run": source.name,
            "reference": run.get("reference"),
            "dataset": dataset,
            "unsafe_sandbox": run.get("unsafe_sandbox"),
            "complete": run.get("complete"),
        },
    )
    plan = EvalPlan(steps=[EvalPlanStep(solver=f"tsbench/{run.get('harness')}", params=harness_config)])
    total = _usage(
        samples["input_tokens"].sum() if rows else 0,
        samples["output_tokens"].sum() if rows else 0,
        samples["cost_usd"].dropna().sum() if rows and samples["cost_usd"].notna().any() else None,
    )
    stats = EvalStats(started_at=created, completed_at=run.get("updated_at") or created, model_usage={model: total})
    return EvalLog(
        # An incomplete run is one that stopped and can resume: inspect's "cancelled".
        status="success" if run.get("complete") else "cancelled",
        eval=spec,
        plan=plan,
        results=_results(source),
        stats=stats,
        samples=[_sample(r, model) for r in rows],
    )


def write_inspect_log(source: RunSource, out: Path) -> Path:
    """Write `out` (.eval, inspect's default, or .json); returns it."""
    out = Path(out)
    if out.suffix not in (".eval", ".json"):
        out = out / f"{source.name}.eval"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(build_eval_log(source), str(out))
    return out
