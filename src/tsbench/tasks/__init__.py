"""Task families by name. A built-in family is one line here; any other is `module:attribute`
(a Taskset instance or class), so a family can live outside this package, even in tests/."""

from __future__ import annotations

import functools
import importlib

from tsbench.core.errors import UserError
from tsbench.tasks.base import Taskset

BUILTIN = {
    "anomalyxl": "tsbench.tasks.anomalyxl.taskset:AnomalyXL",
    "ltaf": "tsbench.tasks.ltaf.taskset:LTAF",
    "sleep-psg": "tsbench.tasks.sleep_psg.taskset:SleepPSG",
    "arfbench": "tsbench.tasks.arfbench.taskset:ARFBench",
    "timerbed": "tsbench.tasks.timerbed.taskset:TimerBed",
    "timesage": "tsbench.tasks.timesage.taskset:TimeSage",
}


@functools.lru_cache(maxsize=None)
def get_taskset(name: str) -> Taskset:
    target = BUILTIN.get(name, name)
    if ":" not in target:
        raise UserError(f"unknown task family {name!r}; choose from {', '.join(BUILTIN)} or give module:attribute")
    module_name, attribute = target.split(":", 1)
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot load task family {name!r}: {exc}") from None
    taskset = found() if isinstance(found, type) else found
    if not isinstance(taskset, Taskset):
        raise UserError(f"{name!r} is not a Taskset (see tsbench/tasks/base.py)")
    return taskset


def family_names() -> list[str]:
    return list(BUILTIN)
