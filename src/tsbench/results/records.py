"""The one record builder: a sample, an episode outcome and a score become one results row."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from tsbench.core.episode import EpisodeOutcome
from tsbench.results.schema import COLUMN_NAMES

MAX_ERROR_CHARS = 2000


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_record(*, sample_id: str, epoch: int, family: str, columns: dict[str, Any], model: str, harness: str,
               depth: int, gold: Any) -> dict[str, Any]:
    """Every column at its empty value, identity filled in. `columns` are the family's (Sample.columns)."""
    record: dict[str, Any] = dict.fromkeys(COLUMN_NAMES)
    record.update(
        id=sample_id, epoch=int(epoch), family=family, split=columns.get("split"), regime=columns.get("regime"),
        category=columns.get("category"), length=columns.get("length"), n_channels=columns.get("n_channels"),
        attributes={str(k): str(v) for k, v in (columns.get("attributes") or {}).items()},
        model=model, harness=harness, depth=int(depth), gold=json.dumps(gold, sort_keys=True, default=str),
        valid=False, metrics={}, turns=0, code_cells=0, sub_calls=0, forced_final=False, input_tokens=0,
        output_tokens=0, sub_call_tokens=0, latency_s=0.0, transcript="[]",
    )
    return record


def apply_outcome(record: dict[str, Any], outcome: EpisodeOutcome) -> dict[str, Any]:
    """What the episode did: messages, counts, tokens, cost; on failure the error, never a score."""
    result = outcome.result
    if result is not None:
        record.update(
            final_message=result.final_message, turns=result.turns, code_cells=result.code_cells,
            sub_calls=result.sub_calls, sub_call_tokens=result.sub_call_tokens, forced_final=result.forced_final,
            input_tokens=result.input_tokens, output_tokens=result.output_tokens, cost_usd=result.cost_usd,
            transcript=json.dumps(result.transcript, ensure_ascii=False, default=str),
        )
        record["attributes"] = {**record["attributes"], **{str(k): str(v) for k, v in result.attributes.items()}}
        record["metrics"] = {**record["metrics"], **{str(k): float(v) for k, v in result.metrics.items()}}
    if outcome.error_type is not None:
        record.update(error_type=outcome.error_type, error=(outcome.error or "")[:MAX_ERROR_CHARS],
                      attempts=outcome.attempts, score=None)
    return record


def apply_score(record: dict[str, Any], *, score: float, valid: bool, parsed: Any, answer_error: str | None,
                metrics: dict[str, float | None]) -> dict[str, Any]:
    """The scorer's verdict on a finished episode."""
    if record.get("error_type") is not None:
        raise ValueError("an error row is never scored")
    record.update(
        score=float(score), valid=bool(valid), answer_error=answer_error,
        parsed_answer=None if parsed is None else json.dumps(parsed, ensure_ascii=False, default=str),
        metrics={**(record.get("metrics") or {}), **{k: float(v) for k, v in metrics.items() if v is not None}},
    )
    return record


def finish(record: dict[str, Any], latency_s: float) -> dict[str, Any]:
    record.update(latency_s=float(latency_s), finished_at=now_utc())
    return record
