"""TimeClaw's typed tools (paper Table 10 plus anomaly primitives), run inside the sandbox kernel.

The series never leaves the kernel: at the start of an episode the host sends the tool
implementations below to the kernel *as source* (one silent install cell), and each tool call is
one cell that calls the kernel-side dispatcher `_tc_call(name, arguments)`. The dispatcher prints a
single tagged line of compact JSON, which the host reads back as the observation: `{"ok": ...}` or
`{"error": "..."}`. A tool that raises becomes an error observation, never a crash.

The tools themselves are harness/kernel_tools.py (with the helpers of harness/kernel_helpers.py);
their schemas come from harness/tool_specs.py; this module holds the toolset of one harness: which
tools, the install cell, argument validation, and reading observations back.

Kernel-side names: `series`, `channels`, `L` (from the sandbox boot), `TASK` (category, regime,
length, channel names, options: never the gold), numpy as `np`, scipy, and every tool by name.
Heavy libraries (statsmodels, ruptures, stumpy, matplotlib) are imported on first use only.

"""

from __future__ import annotations

import base64
import inspect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsbench.harness.kernel_tools import KERNEL_HELPERS, SEED_TOOL_NAMES  # noqa: F401
from tsbench.harness.runtime.sandbox import CellResult, truncate_observation
from tsbench.harness.stumpy_cache import (  # noqa: F401  (re-exported)
    stumpy_cache_dir,
    stumpy_cache_ready,
    warm_stumpy_cache,
    warm_stumpy_cache_in_background,
)
from tsbench.harness.tool_constants import RESULT_TAG, TOOL_FILE, TOOL_JSON  # noqa: F401
from tsbench.harness.tool_specs import ToolSourceError, ToolSpec, load_tools_dir, seed_specs, spec_from_source  # noqa: F401


@dataclass
class Observation:
    """What one tool call gave back: the compact JSON text the model sees, and any images."""

    text: str
    error: bool = False
    data: Any = None  # the parsed "ok" value (None on error)
    images: list[bytes] = field(default_factory=list)
    stdout: str = ""


def error_observation(message: str) -> Observation:
    return Observation(json.dumps({"error": message}, ensure_ascii=False), error=True)


class Toolset:
    """The tools of one harness: seed tools (minus images unless asked) plus evolved ones."""

    def __init__(self, specs: list[ToolSpec]):
        self.specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self.specs:
                raise ValueError(f"two tools are named {spec.name!r}")
            self.specs[spec.name] = spec

    @classmethod
    def build(
        cls,
        *,
        image: bool = False,
        tools_dir: str | Path | None = None,
        extra: list[ToolSpec] | None = None,
        include: list[str] | None = None,
    ) -> Toolset:
        seeds = [s for s in seed_specs().values() if image or not s.image]
        evolved = list(load_tools_dir(tools_dir)) if tools_dir else []
        evolved += list(extra or [])
        clashes = sorted({s.name for s in evolved} & set(seed_specs()))
        if clashes:
            raise ValueError(f"evolved tool name(s) clash with seed tools: {', '.join(clashes)}")
        specs = seeds + evolved
        if include is not None:
            specs = [s for s in specs if s.name in include]
        return cls(specs)

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def openai_tools(self) -> list[dict[str, Any]]:
        return [spec.openai_tool() for spec in self.specs.values()]

    def catalog(self) -> str:
        """The text-protocol listing: each tool's signature and the first sentence of its description
        (short, for small local models; the observations' keys describe themselves)."""
        return "\n".join(f"- {spec.signature()}: {_first_sentence(spec.description)}" for spec in self.specs.values())

    # -- the kernel side ------------------------------------------------------------------------
    def install_code(
        self, task_meta: dict[str, Any], *, numba_cache: str | None = None, verification: bool = False
    ) -> str:
        """The silent cell that defines the helpers, the seed tools and the evolved tools in the kernel."""
        seeds = [s for s in self.specs.values() if s.family == "seed"]
        evolved = [s for s in self.specs.values() if s.family != "seed"]
        parts = [
            "import json as _tc_json",
            f"_TC_TAG = {RESULT_TAG!r}",
            f"_TC_CONFIG = {{'numba_cache': {numba_cache!r}}}",
            f"TASK = _tc_json.loads({json.dumps(task_meta)!r})",
        ]
        parts += [inspect.getsource(f) for f in KERNEL_HELPERS]
        parts += [spec.source for spec in seeds]
        parts.append("_TC_TOOLS = {" + ", ".join(f"{s.name!r}: {s.name}" for s in seeds) + "}")
        if verification:
            parts.append("_TC_ALL = dict(series)")
        for spec in evolved:
            parts.append(f"_tc_define({spec.name!r}, {spec.source!r})")
        return "\n\n".join(parts) + "\n"

    def validate(self, name: str, arguments: Any) -> str | None:
        """Why a call is refused before it reaches the kernel (None when it is fine)."""
        spec = self.specs.get(name)
        if spec is None:
            return f"unknown tool {name!r}; tools are {', '.join(self.specs)}"
        if not isinstance(arguments, dict):
            return "arguments must be a JSON object"
        properties = spec.parameters.get("properties", {})
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            return f"{name} takes no argument(s) {', '.join(unknown)}; its signature is {spec.signature()}"
        missing = [p for p in spec.parameters.get("required", []) if p not in arguments]
        if missing:
            return f"{name} needs argument(s) {', '.join(missing)}; its signature is {spec.signature()}"
        for arg, value in arguments.items():
            kind = properties[arg].get("type")
            if value is None or kind is None:
                continue
            if not _matches(kind, value):
                return f"argument {arg!r} of {name} must be of type {kind}, got {json.dumps(value)[:80]}"
        return None

    @staticmethod
    def call_code(name: str, arguments: dict[str, Any]) -> str:
        return f"_tc_call({name!r}, _tc_json.loads({json.dumps(arguments)!r}))"


def _first_sentence(text: str) -> str:
    found = re.search(r"\.(\s|$)", text)
    return text[: found.start() + 1] if found else text


_PYTHON_TYPES = {"number": (int, float), "string": str, "boolean": bool, "array": list, "object": dict}


def _matches(kind: str, value: Any) -> bool:
    """Whether `value` is of the JSON schema type `kind` (a bool is no number; 2.0 is an integer)."""
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return isinstance(value, _PYTHON_TYPES.get(kind, object))


def read_observation(cell: CellResult, max_chars: int) -> Observation:
    """The tagged JSON line a `_tc_call` cell printed, as an Observation (an error when none came)."""
    text = cell.stdout
    at = text.rfind(RESULT_TAG)
    if at < 0:
        reason = cell.error.strip() or "the tool produced no result"
        return error_observation(truncate_observation(reason, max(200, max_chars // 2)))
    stray = text[:at].strip()
    line = text[at + len(RESULT_TAG) :].split("\n", 1)[0]
    try:
        payload = json.loads(line)
        if not isinstance(payload, dict):  # tool code can print a tagged line of its own
            raise ValueError("not an object")
        images = [base64.b64decode(payload.pop("image_png_b64"))] if "image_png_b64" in payload else []
    except (ValueError, RecursionError, TypeError):  # binascii.Error is a ValueError
        return error_observation("the tool result was not valid JSON")
    if "error" in payload:
        body: dict[str, Any] = {"error": payload["error"]}
        error, data = True, None
    else:
        body, error, data = payload.get("ok"), False, payload.get("ok")
    if stray:
        printed = truncate_observation(stray, 1000)
        body = {**body, "printed": printed} if error else {"result": body, "printed": printed}
    rendered = json.dumps(body, ensure_ascii=False, separators=(", ", ": "))
    return Observation(truncate_observation(rendered, max_chars), error=error, data=data, images=images, stdout=stray)
