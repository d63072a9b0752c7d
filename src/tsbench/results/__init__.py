"""Results: one schema, one journal, one record builder, one run-directory reader."""

from tsbench.results.journal import Journal, JournalRead, read_journal, read_journal_report
from tsbench.results.records import apply_outcome, apply_score, finish, new_record, now_utc
from tsbench.results.schema import COLUMN_NAMES, COLUMNS, JOURNAL, RESULTS_JSON, RUN_JSON, SAMPLES, key_of
from tsbench.results.store import consolidate, is_run_dir, load_run, load_samples, to_table, update_run

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "JOURNAL",
    "RESULTS_JSON",
    "RUN_JSON",
    "SAMPLES",
    "Journal",
    "JournalRead",
    "apply_outcome",
    "apply_score",
    "consolidate",
    "finish",
    "is_run_dir",
    "key_of",
    "load_run",
    "load_samples",
    "new_record",
    "now_utc",
    "read_journal",
    "read_journal_report",
    "to_table",
    "update_run",
]
