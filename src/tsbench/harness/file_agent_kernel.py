"""What the file agent sends into the kernel, as code text: the period's files, the tools, the
registered skills, the event harvest and the skill check.

Everything crosses the wall through `Sandbox.run()` alone (files as base64 inside a cell, events
back as one marked line the harness's own cell prints), so it works with any sandbox that runs
cells, whatever its filesystem. The tools only record events in the kernel; the harness reads
them after each cell and decides what they mean.
"""

from __future__ import annotations

import base64
import json

EVENT_MARK = "\x1ftsbench-events\x1f"
CHECK_MARK = "\x1ftsbench-check\x1f"
CELL_BYTES = 1 << 20  # base64 characters per file-writing cell
TOOL_NAMES = ("final_answer", "request_memory_compaction", "induct_skill", "retrieve_skill")

_WRITE_HELPER = """
def _tsb_write(name, data, append=False):
    import base64, os
    folder = os.path.dirname(name)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(name, "ab" if append else "wb") as handle:
        handle.write(base64.b64decode(data))
"""


def file_cells(files: dict[str, bytes]) -> list[str]:
    """Cells that write `files` into the working directory (large files in several appends) and
    remove what the kernel boot left there that is not the task's."""
    cells, current, size = [], [_WRITE_HELPER], 0
    for name in sorted(files):
        encoded = base64.b64encode(files[name]).decode("ascii")
        chunks = [encoded[i : i + CELL_BYTES] for i in range(0, len(encoded), CELL_BYTES)] or [""]
        for index, chunk in enumerate(chunks):
            if size + len(chunk) > CELL_BYTES and size:
                cells.append("\n".join(current))
                current, size = [], 0
            current.append(f"_tsb_write({name!r}, {chunk!r}, append={index > 0})")
            size += len(chunk)
    current.append(
        "import os as _os\n"
        "for _name in ('context.json', 'series.npz'):\n"
        "    try:\n"
        "        _os.remove(_name)\n"
        "    except OSError:  # absent, or bound read-only by the jail\n"
        "        pass\n"
        "del _os, _name, _tsb_write"
    )
    cells.append("\n".join(current))
    return cells


TOOLS_CELL = r'''
_tsb_events = []
_tsb_library = {}


def _tsb_plain(value):
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def final_answer(answer=None, report=""):
    """Submit this period's output: `answer`, a dict with exactly the required keys, and `report`,
    a concise natural-language report that cites CSV cells or prior-period files. Call it once."""
    import json
    if not isinstance(answer, dict):
        raise TypeError("final_answer(answer=...) takes a dict with the required keys")
    if not isinstance(report, str):
        raise TypeError("final_answer(report=...) takes a string")
    plain = json.loads(json.dumps(answer, default=_tsb_plain))
    _tsb_events.append({"type": "final_answer", "answer": plain, "report": report})
    print("final answer recorded; this period is over")


def request_memory_compaction(reason=""):
    """Ask for your memory to be summarised and reset at the next period boundary."""
    _tsb_events.append({"type": "compaction", "reason": str(reason)})
    print("memory compaction scheduled for the next period boundary")


def induct_skill(name, description, notes="", code=""):
    """Save a small reusable function (`code` defines a function called `name`). It is checked when
    this period ends and, if admitted, becomes a callable tool from the NEXT period on."""
    _tsb_events.append({"type": "induct", "name": str(name), "description": str(description),
                        "notes": str(notes), "code": str(code)})
    print(f"skill {name!r} submitted: checked at the end of this period, callable from the next period if admitted")


def retrieve_skill(name):
    """The notes and full code of a registered skill."""
    _tsb_events.append({"type": "retrieve", "name": str(name)})
    skill = _tsb_library.get(name)
    if skill is None:
        return f"no skill named {name!r}; registered: {sorted(_tsb_library)}"
    return f"{name}: {skill['description']}\nnotes: {skill['notes']}\n\n{skill['code']}"


def _tsb_register(name, description, notes, code):
    namespace = {}
    exec(code, namespace)
    function = namespace[name]

    def skill(*args, **kwargs):
        _tsb_events.append({"type": "skill_call", "name": name})
        return function(*args, **kwargs)

    skill.__name__, skill.__doc__ = name, function.__doc__ or description
    _tsb_library[name] = {"description": description, "notes": notes, "code": code}
    globals()[name] = skill
'''


def tools_cell(skills_enabled: bool, sequential: bool) -> str:
    """Define the tools; tools a mode does not offer are removed again."""
    drop = [
        name
        for name, on in (
            ("request_memory_compaction", sequential),
            ("induct_skill", skills_enabled),
            ("retrieve_skill", skills_enabled),
        )
        if not on
    ]
    return TOOLS_CELL + "".join(f"\ndel {name}" for name in drop) + "\n"


def register_cell(skills: list[dict]) -> str:
    return "\n".join(
        f"_tsb_register({s['name']!r}, {s['description']!r}, {s['notes']!r}, {s['code']!r})" for s in skills
    )


HARVEST_CELL = f"print({EVENT_MARK!r} + __import__('json').dumps(_tsb_events, default=str)); _tsb_events.clear()"


def parse_marked(stdout: str, mark: str):
    """The JSON after the last marked line of a harness cell's output, or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(mark):
            try:
                return json.loads(line[len(mark) :])
            except (ValueError, RecursionError):  # model code can print a marked line of its own
                return None
    return None


CHECK_CELL = r"""
def _tsb_check(name, code, limit_s):
    import inspect, json, signal

    def alarm(signum, frame):
        raise TimeoutError(f"took longer than {limit_s} s")

    report = {"ok": False, "errors": []}
    namespace = {}
    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, limit_s)
        exec(code, namespace)
        function = namespace.get(name)
        if not callable(function):
            report["errors"].append(f"the code does not define a callable {name!r}")
            return report
        parameters = list(inspect.signature(function).parameters.values())
        required = [p for p in parameters if p.default is inspect.Parameter.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        report["signature"] = str(inspect.signature(function))
        if len(parameters) > 6 or len(required) > 1:
            report["errors"].append("a usable skill takes at most one required argument (and at most six in all)")
            return report
        def table():  # pandas only when a candidate needs it (its import is slow under the guards)
            import pandas as pd
            return pd.read_csv("timeseries.csv")

        candidates = [("no arguments", lambda: ())] if not required else [
            ("the CSV path", lambda: ("timeseries.csv",)), ("the table", lambda: (table(),)),
            ("a column", lambda: (table().iloc[:, 1],)), ("a number", lambda: (float(table().iloc[-1, 1]),)),
            ("the schema path", lambda: ("answer_schema.json",)),
        ]
        for description, make in candidates:
            try:
                value = function(*make())
            except Exception as exc:
                report["errors"].append(f"called with {description}: {type(exc).__name__}: {exc}"[:300])
                continue
            plain = json.loads(json.dumps(value, default=_tsb_plain)) if isinstance(value, (dict, list)) else None
            report.update(ok=True, called_with=description, value_type=type(value).__name__,
                          value=plain if len(json.dumps(plain)) < 20000 else None)
            return report
        return report
    except Exception as exc:
        report["errors"].append(f"{type(exc).__name__}: {exc}"[:300])
        return report
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
"""


def check_call(name: str, code: str, limit_s: float) -> str:
    return (
        f"print({CHECK_MARK!r} + __import__('json').dumps(_tsb_check({name!r}, {code!r}, {float(limit_s)!r}), "
        "default=str))"
    )
