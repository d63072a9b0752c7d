"""The one results schema: eval writes it, training logs rollouts in it, TimeClaw and the
leaderboard read it. Each field carries its description in the parquet schema metadata; the
human-readable copy is docs/results-schema.md.

A run directory holds `run.json` (config and provenance), `results.json` (the summary),
`samples.jsonl` (the crash-safe journal, see journal.py) and `samples.parquet` (the journal
consolidated, one row per (id, epoch), rewritten atomically at the end of every run).
"""

from __future__ import annotations

import pyarrow as pa

JOURNAL = "samples.jsonl"
SAMPLES = "samples.parquet"
RUN_JSON = "run.json"
RESULTS_JSON = "results.json"

# JSON-text columns hold values whose shape differs per family or category.
JSON_COLUMNS = ("parsed_answer", "gold", "transcript", "calls")

_FIELDS = [
    ("id", pa.string(), "the sample's id in its dataset"),
    ("epoch", pa.int32(), "the repeat of this sample, from 0"),
    ("family", pa.string(), "the task family (anomalyxl, timesage, ...)"),
    ("split", pa.string(), "the dataset split the sample came from"),
    ("regime", pa.string(), "the family's subset: AnomalyXL precise | coarse, TimeSage the tier"),
    ("category", pa.string(), "the task category: one column of the results table"),
    ("length", pa.int32(), "samples per channel of the series, null when the task has none"),
    ("n_channels", pa.int32(), "channels of the series, null when the task has none"),
    ("attributes", pa.map_(pa.string(), pa.string()), "family facts about the sample (scenario, period, ...)"),
    ("model", pa.string(), "the provider/name spec the run was given"),
    ("harness", pa.string(), "the harness that ran the episode"),
    ("depth", pa.int32(), "sub_rlm recursion depth"),
    ("final_message", pa.string(), "the model's final message, as it was scored"),
    ("parsed_answer", pa.string(), "JSON: the typed answer the scorer read; null if nothing parsed"),
    ("gold", pa.string(), "JSON: the gold answer"),
    ("score", pa.float64(), "score in [0, 1]; null on error rows (an error is never a 0)"),
    ("valid", pa.bool_(), "the answer parsed and passed the category's type check"),
    ("answer_error", pa.string(), "why the answer was unusable, when valid is false"),
    ("metrics", pa.map_(pa.string(), pa.float64()), "secondary metrics of the category (IoU, F1, errors, ...)"),
    ("turns", pa.int32(), "model replies in the episode"),
    ("code_cells", pa.int32(), "code cells or tool calls run in the jail"),
    ("sub_calls", pa.int32(), "nested sub_rlm episodes"),
    ("forced_final", pa.bool_(), "the turn budget ran out and the answer was demanded"),
    ("input_tokens", pa.int64(), "prompt tokens over all replies"),
    ("output_tokens", pa.int64(), "generated tokens over all replies"),
    ("sub_call_tokens", pa.int64(), "tokens spent in sub_rlm episodes"),
    ("latency_s", pa.float64(), "wall-clock seconds of the episode"),
    ("cost_usd", pa.float64(), "API dollars, null when the price is unknown"),
    (
        "error_type",
        pa.string(),
        "null when the episode finished; else rate_limit, server, timeout, sandbox, kernel_lost, worker_lost, ...",
    ),
    ("error", pa.string(), "the error message of an error row"),
    ("attempts", pa.int32(), "model calls tried for the failing call (retries + 1), on error rows"),
    ("transcript", pa.string(), "JSON: messages, code, observations, image references"),
    ("finished_at", pa.timestamp("us", tz="UTC"), "when the episode finished"),
    # Added later: rows written before have them null (ADDED_COLUMNS).
    (
        "calls",
        pa.string(),
        "JSON: one entry per model call: turn, finish_reason, usage (reported | missing), "
        "input_tokens, output_tokens, cost_usd, attempts, failed_attempts, latency_s, wall_s; "
        "the call an error row died on has error, status_code, attempts, wall_s",
    ),
    (
        "truncated_replies",
        pa.int32(),
        "replies stopped by the token cap (finish_reason length): never taken as the final answer",
    ),
    (
        "node",
        pa.string(),
        "host name of the machine that played the episode (for a row the driver recorded itself, e.g. a "
        "lost Ray worker's, the node that worker was on when known); null in rows written before",
    ),
    (
        "worker",
        pa.string(),
        "the worker that played it: threads:<thread>@<pid> (the threads executor) or ray:<actor>@<pid>",
    ),
]
# Columns later than the first schema: older journals and parquet files lack them, and read as null.
ADDED_COLUMNS = ("calls", "truncated_replies", "node", "worker")

COLUMNS = pa.schema([pa.field(name, kind, metadata={"description": text}) for name, kind, text in _FIELDS])
COLUMN_NAMES = [f.name for f in COLUMNS]
DESCRIPTIONS = {name: text for name, _, text in _FIELDS}


def key_of(record: dict) -> tuple[str, int]:
    return (str(record["id"]), int(record["epoch"]))


RECORD_KEYS = ("id", "epoch", "category", "score", "error_type")


def fits(value: object, kind: pa.DataType) -> bool:
    """Whether a JSON value can fill a column of this type (null fills any)."""
    if value is None:
        return True
    if pa.types.is_boolean(kind):
        return isinstance(value, bool)
    if pa.types.is_integer(kind):
        return isinstance(value, int) and not isinstance(value, bool)
    if pa.types.is_floating(kind):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if pa.types.is_map(kind):
        return isinstance(value, (dict, str))  # a JSON text in journals written before maps
    return isinstance(value, str)  # strings, and timestamps as ISO text


def is_record(value: object) -> bool:
    """A journal line that is a results record (valid JSON can still be something else: a stray
    `{"id": ..., "epoch": 0}` must not count as a finished row, nor a score of "abc" break the table)."""
    return (
        isinstance(value, dict)
        and all(k in value for k in RECORD_KEYS)
        and isinstance(value["id"], str)
        and value["epoch"] is not None
        and all(fits(v, COLUMNS.field(k).type) for k, v in value.items() if k in COLUMN_NAMES)
    )
