"""Tagged JSON: TSAIA's pickled values (numpy arrays, pandas frames, dicts with any keys) as plain JSON.

`encode` runs inside the jail, where the release's pickles are loaded (`tsbench convert-tsaia`): this
file is sent there as source and needs only numpy and pandas. `tagged.decode` reads the result on the
host and builds only arrays of plain dtypes, frames, lists and dicts from it. Tags:
{"$array": {dtype, shape, data (base64 of the C-order bytes)}}, {"$objects": {shape, items}},
{"$frame": {columns, index, values}}, {"$series": {name, index, values}}, {"$datetime": iso},
{"$float": "nan" | "inf" | "-inf"}, {"$tuple": [...]}, {"$dict": [[key, value], ...]} (keys that
are not plain strings), {"$unsupported": type name}.
"""

import base64
import datetime
import math

PLAIN_KINDS = "biufUM"  # bool, ints, floats, unicode, datetime64


def _array(values):
    import numpy as np

    array = np.asarray(values)
    if array.dtype.kind == "O":
        items = [encode(v) for v in array.ravel().tolist()]
        return {"$objects": {"shape": list(array.shape), "items": items}}
    if array.dtype.kind not in PLAIN_KINDS:
        return {"$unsupported": f"array of {array.dtype}"}
    array = np.ascontiguousarray(array)
    data = base64.b64encode(array.tobytes()).decode("ascii")
    return {"$array": {"dtype": array.dtype.str, "shape": list(array.shape), "data": data}}


def _index(index):
    import pandas as pd

    if isinstance(index, pd.DatetimeIndex):
        return _array(index.tz_localize(None).values if index.tz is not None else index.values)
    try:
        return _array(pd.to_datetime(index).values) if index.dtype == object and len(index) else _array(index)
    except (TypeError, ValueError):
        return _array(index.astype(str))


def encode(value):
    """A JSON-able form of `value`, for `tagged.decode`."""
    import numpy as np
    import pandas as pd

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        value = value.item() if isinstance(value, np.generic) else value
        if isinstance(value, float) and not math.isfinite(value):
            return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
        return value
    if isinstance(value, (datetime.date, pd.Timestamp, np.datetime64)):
        return {"$datetime": pd.Timestamp(value).isoformat()}
    if isinstance(value, np.ndarray):
        return _array(value)
    if isinstance(value, pd.DataFrame):
        return {
            "$frame": {
                "columns": [encode(c) for c in value.columns],
                "index": _index(value.index),
                "values": [_array(value.iloc[:, i].to_numpy()) for i in range(value.shape[1])],
            }
        }
    if isinstance(value, pd.Series):
        return {
            "$series": {"name": encode(value.name), "index": _index(value.index), "values": _array(value.to_numpy())}
        }
    if isinstance(value, pd.Index):
        return _index(value)
    if isinstance(value, (list, tuple)):
        items = [encode(v) for v in value]
        return items if isinstance(value, list) else {"$tuple": items}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {"$dict": [[encode(k), encode(v)] for k, v in value.items()]}
    return {"$unsupported": type(value).__name__}
