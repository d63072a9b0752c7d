"""AnomalyXL scoring: response text -> typed answer -> score in [0, 1] -> table numbers.

``score`` and ``metrics`` are the stable entry points; they never raise on a response string.
Note that the name ``metrics`` here is the function; import per-category helpers with
``from tsbench.tasks.anomalyxl.metrics import ...``.
"""

from tsbench.core.stats import bootstrap_ci, category_means, macro_f1, overall_mean, paired_bootstrap_diff
from tsbench.core.text import json_object_spans, strip_reasoning

from .extract import (
    Extraction,
    extract_answer,
    extract_json_answer,
    extract_mcq_answer,
)
from .metrics import iou, match_events, metrics, score

__all__ = [
    "Extraction",
    "bootstrap_ci",
    "category_means",
    "extract_answer",
    "extract_json_answer",
    "extract_mcq_answer",
    "iou",
    "json_object_spans",
    "macro_f1",
    "match_events",
    "metrics",
    "overall_mean",
    "paired_bootstrap_diff",
    "score",
    "strip_reasoning",
]
