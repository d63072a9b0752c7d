"""The host's answer to one `sub_rlm(question, data)` request a kernel cell sent over stdin.

The request is JSON (numpy arrays tagged by kernel_boot's `_to_json`); the answer goes back as JSON too,
`{"answer": ...}` or `{"error": ...}`: the handler's failure is the model's observation, while a budget of
the row's spent inside the sub episode (core/deadline.BudgetSpent) ends the row and passes through.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from tsbench.core.deadline import BudgetSpent

SubRlmHandler = Callable[[str, "dict[str, Any] | None"], str]


def sub_rlm_reply(handler: SubRlmHandler, request_json: str) -> str:
    try:
        request = json.loads(request_json, object_hook=_decode_arrays)
        return json.dumps({"answer": str(handler(request["question"], request["data"]))})
    except BudgetSpent:
        raise
    except Exception as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})


def _decode_arrays(obj: dict) -> Any:
    """json object_hook: rebuild the arrays that the kernel tagged in sub_rlm data."""
    if set(obj) == {"__ndarray__"}:
        return np.asarray(obj["__ndarray__"])
    return obj
