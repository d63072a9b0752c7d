"""Task families by name. A built-in family is one line here; an installed package adds one with a
`family.<name>` entry point in the `tsbench.plugins` group; any other is `module:attribute` (a
TaskFamily instance or class), so a family can live outside this package, even in tests/."""

from __future__ import annotations

import functools

from tsbench.core.errors import UserError
from tsbench.core.registry import Registry
from tsbench.tasks.base import TaskFamily

BUILTIN = {
    "anomalyxl": "tsbench.tasks.anomalyxl.taskset:AnomalyXL",
    "ltaf": "tsbench.tasks.ltaf.taskset:LTAF",
    "sleep-psg": "tsbench.tasks.sleep_psg.taskset:SleepPSG",
    "arfbench": "tsbench.tasks.arfbench.taskset:ARFBench",
    "timerbed": "tsbench.tasks.timerbed.taskset:TimerBed",
    "timesage": "tsbench.tasks.timesage.taskset:TimeSage",
    "cik": "tsbench.tasks.cik.taskset:CiK",
    "tsrbench": "tsbench.tasks.tsrbench.taskset:TSRBench",
    "tsaia": "tsbench.tasks.tsaia.taskset:TSAIA",
    "trend": "tsbench.tasks.trend.taskset:Trend",
}
# Plugins add `family.<name>` entry points to the `tsbench.plugins` group (see tsbench.core.registry).
FAMILIES = Registry("family", BUILTIN, direct=True)


@functools.cache
def get_taskset(name: str) -> TaskFamily:
    found = FAMILIES.load(name)
    taskset = found() if isinstance(found, type) else found
    if not isinstance(taskset, TaskFamily):
        raise UserError(f"{name!r} is not a TaskFamily subclass (see tsbench/tasks/base.py)")
    return taskset
