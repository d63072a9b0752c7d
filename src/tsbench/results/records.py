"""The one record builder: a sample, an episode outcome and a score become one results row."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tsbench.core import json_input
from tsbench.core.episode import EpisodeOutcome
from tsbench.core.unicode_text import ALTERED_ATTRIBUTE
from tsbench.results.schema import COLUMN_NAMES

MAX_ERROR_CHARS = 2000


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_record(
    *, sample_id: str, epoch: int, family: str, columns: dict[str, Any], model: str, harness: str, depth: int, gold: Any
) -> dict[str, Any]:
    """Every column at its empty value, identity filled in. `columns` are the family's (Sample.columns)."""
    record: dict[str, Any] = dict.fromkeys(COLUMN_NAMES)
    record.update(
        id=sample_id,
        epoch=int(epoch),
        family=family,
        split=columns.get("split"),
        regime=columns.get("regime"),
        category=columns.get("category"),
        length=columns.get("length"),
        n_channels=columns.get("n_channels"),
        attributes={str(k): str(v) for k, v in (columns.get("attributes") or {}).items()},
        model=model,
        harness=harness,
        depth=int(depth),
        gold=json.dumps(gold, sort_keys=True, default=str),
        valid=False,
        metrics={},
        turns=0,
        code_cells=0,
        sub_calls=0,
        forced_final=False,
        input_tokens=0,
        output_tokens=0,
        sub_call_tokens=0,
        latency_s=0.0,
        transcript="[]",
        calls="[]",
        truncated_replies=0,
    )
    return record


def apply_outcome(record: dict[str, Any], outcome: EpisodeOutcome) -> dict[str, Any]:
    """What the episode did: messages, counts, tokens, cost, every model call; on failure the error,
    never a score, but what the episode spent before it failed (when the harness kept it)."""
    result = outcome.result
    if result is not None:
        record.update(
            final_message=result.final_message,
            turns=result.turns,
            code_cells=result.code_cells,
            sub_calls=result.sub_calls,
            sub_call_tokens=result.sub_call_tokens,
            forced_final=result.forced_final,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            transcript=json.dumps(
                _without_final_copy(result.transcript, result.final_message), ensure_ascii=False, default=str
            ),
            calls=json.dumps(result.calls, default=str),
            # A call whose server sent no usage (or none to trust) has unknown tokens: the cost is unknown.
            cost_usd=None if any(c.get("usage") in ("missing", "invalid") for c in result.calls) else result.cost_usd,
            truncated_replies=sum(1 for call in result.calls if call.get("finish_reason") == "length"),
        )
        record["attributes"] = {**record["attributes"], **{str(k): str(v) for k, v in result.attributes.items()}}
        distrusted = sum(1 for call in result.calls if call.get("usage") == "invalid")
        if distrusted:  # the server's counts were no token counts: the row's tokens are our estimate
            record["attributes"]["usage_invalid_calls"] = str(distrusted)
        if altered := sum(int(c.get(ALTERED_ATTRIBUTE) or 0) for c in result.calls if isinstance(c, dict)):
            record["attributes"][ALTERED_ATTRIBUTE] = str(altered)  # replies made valid at the client
        record["metrics"] = {**record["metrics"], **{str(k): float(v) for k, v in result.metrics.items()}}
    if outcome.error_type is not None:
        record.update(
            error_type=outcome.error_type,
            error=(outcome.error or "")[:MAX_ERROR_CHARS],
            attempts=outcome.attempts,
            score=None,
        )
    return record


FINAL_REF = "final_message"  # a transcript event's "content_from": its content is the row's final_message


def _without_final_copy(transcript: list[dict], final_message: str) -> list[dict]:
    """The final answer is stored once: the (last) event that carries it points at `final_message`."""
    for index in range(len(transcript) - 1, -1, -1):
        event = transcript[index]
        if final_message and isinstance(event, dict) and event.get("content") == final_message:
            stored = {key: value for key, value in event.items() if key != "content"}
            return [*transcript[:index], {**stored, "content_from": FINAL_REF}, *transcript[index + 1 :]]
    return transcript


def transcript_events(record: dict[str, Any]) -> list[dict]:
    """A row's transcript as the episode had it (the final answer put back where it was said)."""
    events = json_input.loads(record.get("transcript") or "[]", f"the transcript of row {record.get('id')}")
    for event in events if isinstance(events, list) else []:
        if isinstance(event, dict) and event.get("content_from") == FINAL_REF:
            event["content"] = record.get("final_message") or ""
            del event["content_from"]
    return events


def apply_score(
    record: dict[str, Any],
    *,
    score: float,
    valid: bool,
    parsed: Any,
    answer_error: str | None,
    metrics: dict[str, float | None],
) -> dict[str, Any]:
    """The scorer's verdict on a finished episode."""
    if record.get("error_type") is not None:
        raise ValueError("an error row is never scored")
    record.update(
        score=float(score),
        valid=bool(valid),
        answer_error=answer_error,
        parsed_answer=None if parsed is None else json.dumps(parsed, ensure_ascii=False, default=str),
        metrics={**(record.get("metrics") or {}), **{k: float(v) for k, v in metrics.items() if v is not None}},
    )
    return record


def finish(record: dict[str, Any], latency_s: float) -> dict[str, Any]:
    record.update(latency_s=float(latency_s), finished_at=now_utc())
    return record
