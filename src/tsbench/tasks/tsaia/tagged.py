"""Reads tagged JSON (encode.py) back into values, building nothing but arrays of plain dtypes (bool,
ints, floats, text, datetime64), pandas frames and series, lists, tuples and dicts."""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np
import pandas as pd

from tsbench.tasks.tsaia.encode import PLAIN_KINDS

MAX_ELEMENTS = 200_000_000  # far above any TSAIA array; a tag claiming more is not read


class TagError(ValueError):
    """The text is not tagged JSON as encode.py writes it."""


def _array(spec: Any) -> np.ndarray:
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data"}:
        raise TagError("a malformed $array")
    try:
        dtype = np.dtype(str(spec["dtype"]))
    except TypeError:
        raise TagError(f"an array of dtype {spec['dtype']!r}") from None
    shape = spec["shape"]
    if dtype.kind not in PLAIN_KINDS or dtype.hasobject or dtype.fields is not None:
        raise TagError(f"an array of dtype {dtype}")
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape) or len(shape) > 8:
        raise TagError("an array of a bad shape")
    size = math.prod(shape)
    if size > MAX_ELEMENTS:
        raise TagError(f"an array of {size} elements")
    try:
        raw = base64.b64decode(spec["data"], validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise TagError("an array whose data is not base64") from None
    if len(raw) != size * dtype.itemsize:
        raise TagError("an array whose data does not fill its shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _objects(spec: Any) -> np.ndarray:
    if not isinstance(spec, dict) or not isinstance(spec.get("items"), list) or not isinstance(spec.get("shape"), list):
        raise TagError("a malformed $objects")
    items = [decode(v) for v in spec["items"]]
    out = np.empty(len(items), dtype=object)
    out[:] = items
    try:
        return out.reshape(spec["shape"])
    except (TypeError, ValueError):
        raise TagError("an object array of a bad shape") from None


def _frame(spec: Any) -> pd.DataFrame:
    if not isinstance(spec, dict) or set(spec) != {"columns", "index", "values"}:
        raise TagError("a malformed $frame")
    columns, values = [decode(c) for c in spec["columns"]], [decode(v) for v in spec["values"]]
    index = decode(spec["index"])
    if len(columns) != len(values) or any(not isinstance(v, np.ndarray) or v.ndim != 1 for v in values):
        raise TagError("a $frame whose columns and values differ")
    try:
        return pd.DataFrame(dict(zip(range(len(values)), values)), index=index).set_axis(columns, axis=1)
    except (TypeError, ValueError):
        raise TagError("a $frame whose columns differ in length") from None


def _series(spec: Any) -> pd.Series:
    if not isinstance(spec, dict) or set(spec) != {"name", "index", "values"}:
        raise TagError("a malformed $series")
    try:
        return pd.Series(decode(spec["values"]), index=decode(spec["index"]), name=decode(spec["name"]))
    except (TypeError, ValueError):
        raise TagError("a $series whose index and values differ") from None


def _float(spec: Any) -> float:
    if spec not in ("nan", "inf", "-inf"):
        raise TagError("a malformed $float")
    return float(spec)


def _datetime(spec: Any) -> pd.Timestamp:
    try:
        return pd.Timestamp(str(spec))
    except (TypeError, ValueError):
        raise TagError("a malformed $datetime") from None


def _pairs(spec: Any) -> dict:
    if not isinstance(spec, list) or not all(isinstance(p, list) and len(p) == 2 for p in spec):
        raise TagError("a malformed $dict")
    try:
        return {decode(k): decode(v) for k, v in spec}
    except TypeError:
        raise TagError("a $dict with an unhashable key") from None


def _tuple(spec: Any) -> tuple:
    if not isinstance(spec, list):
        raise TagError("a malformed $tuple")
    return tuple(decode(v) for v in spec)


def _unsupported(spec: Any) -> Any:
    raise TagError(f"a value the converter could not represent ({str(spec)[:60]})")


_TAGS = {
    "$array": _array,
    "$objects": _objects,
    "$frame": _frame,
    "$series": _series,
    "$float": _float,
    "$datetime": _datetime,
    "$dict": _pairs,
    "$tuple": _tuple,
    "$unsupported": _unsupported,
}


def decode(value: Any) -> Any:
    """The value a tagged-JSON document stands for; TagError for anything else."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and next(iter(value)) in _TAGS:
            tag, spec = next(iter(value.items()))
            return _TAGS[tag](spec)
        if any(isinstance(k, str) and k.startswith("$") for k in value):
            raise TagError(f"an unknown tag among {sorted(value)[:3]}")
        return {k: decode(v) for k, v in value.items()}
    raise TagError(f"a {type(value).__name__}")
