"""Arrow types as the `features` of a dataset card's YAML header, in the layout `datasets` writes.

`datasets.load_dataset` casts every file to the card's features, so they must say exactly what the
parquet holds: `dtype` for a scalar, `list` (nested as deep as the data), `length` for a fixed-size
list and a list of named fields for a struct. Written here without importing `datasets`.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

_SCALARS = {
    pa.string(): "string",
    pa.large_string(): "large_string",
    pa.bool_(): "bool",
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.uint8(): "uint8",
    pa.uint16(): "uint16",
    pa.uint32(): "uint32",
    pa.uint64(): "uint64",
    pa.float16(): "float16",
    pa.float32(): "float32",
    pa.float64(): "float64",
    pa.binary(): "binary",
    pa.large_binary(): "large_binary",
    pa.date32(): "date32",
    pa.null(): "null",
}


def _inner(kind: pa.DataType) -> Any:
    """A type's feature value: a dtype name, {list: ...} or a list of fields for a struct."""
    if pa.types.is_dictionary(kind):  # categorical columns load as their values
        return _inner(kind.value_type)
    if pa.types.is_struct(kind):
        return [{"name": f.name, **_entry(f.type)} for f in kind]
    if pa.types.is_fixed_size_list(kind):
        return {"list": _inner(kind.value_type), "length": kind.list_size}
    if pa.types.is_large_list(kind):
        return {"large_list": _inner(kind.value_type)}
    if pa.types.is_list(kind):
        return {"list": _inner(kind.value_type)}
    if pa.types.is_timestamp(kind):
        return f"timestamp[{kind.unit}" + (f", tz={kind.tz}]" if kind.tz else "]")
    if kind in _SCALARS:
        return _SCALARS[kind]
    raise ValueError(f"no datasets feature for Arrow type {kind}")


def _entry(kind: pa.DataType) -> dict[str, Any]:
    """One named feature's keys beside its `name`."""
    inner = _inner(kind)
    if isinstance(inner, str):
        return {"dtype": inner}
    if isinstance(inner, list):
        return {"struct": inner}
    return inner


def features(schema: pa.Schema) -> list[dict[str, Any]]:
    """The card's `dataset_info.features` for a table with this schema."""
    return [{"name": f.name, **_entry(f.type)} for f in schema]
