"""A tool's contract from its source: JSON schema (native function calling) and one-line signature
(the text protocol), derived with `ast` from type hints and a Google-style docstring. The same
parser reads the seed tools and the tools written by capability evolution (timeclaw/evolve.py),
whose source is only ever executed in the kernel. Evolved tools live in `<dir>/<name>/{tool.py, tool.json}`.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.harness.kernel_tools import _SEED_FUNCTIONS, IMAGE_TOOLS
from tsbench.harness.tool_constants import NAME as _NAME
from tsbench.harness.tool_constants import TOOL_FILE, TOOL_JSON

_JSON_TYPES = {
    "int": "integer",
    "float": "number",
    "str": "string",
    "bool": "boolean",
    "dict": "object",
    "list": "array",
    "tuple": "array",
    "Sequence": "array",
    "Any": None,
    "object": None,
}


def _annotation_schema(node: ast.expr | None) -> tuple[dict[str, Any], bool]:
    """(JSON schema of an annotation, whether None is allowed)."""
    if node is None:
        return {}, False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return {}, False
    if isinstance(node, ast.Constant) and node.value is None:
        return {"type": "null"}, True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, left_none = _annotation_schema(node.left)
        right, right_none = _annotation_schema(node.right)
        parts = [s for s in (left, right) if s and s != {"type": "null"}]
        return (parts[0] if len(parts) == 1 else {}), left_none or right_none
    if isinstance(node, ast.Subscript):
        outer = ast.unparse(node.value).split(".")[-1]
        if outer == "Optional":
            inner, _ = _annotation_schema(node.slice)
            return inner, True
        if outer == "Union":
            elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            schemas = [_annotation_schema(e) for e in elements]
            parts = [s for s, _ in schemas if s and s != {"type": "null"}]
            return (parts[0] if len(parts) == 1 else {}), any(n for _, n in schemas)
        kind = _JSON_TYPES.get(outer)
        schema: dict[str, Any] = {"type": kind} if kind else {}
        if kind == "array":
            element = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
            items, _ = _annotation_schema(element)
            if items:
                schema["items"] = items
        return schema, False
    name = ast.unparse(node).split(".")[-1]
    kind = _JSON_TYPES.get(name)
    return ({"type": kind} if kind else {}), False


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {parameter: description}) of a Google-style docstring (an "Args:" section)."""
    description: list[str] = []
    params: dict[str, str] = {}
    section = None  # None: the description; "args": inside Args; "other": another section
    param_indent = None
    current = None
    for line in doc.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if re.match(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):$", stripped):
            section = "args" if stripped in ("Args:", "Arguments:", "Parameters:") else "other"
            param_indent, current = None, None
            continue
        if section is None:
            description.append(stripped)
        elif section == "args" and stripped:
            found = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if found and (param_indent is None or indent <= param_indent):
                param_indent, current = indent, found.group(1)
                params[current] = found.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {stripped}".strip()
    return " ".join(" ".join(description).split()), params


@dataclass
class ToolSpec:
    """A typed tool: what the model is told (name, description, JSON-schema parameters) and its source."""

    name: str
    description: str
    parameters: dict[str, Any]
    source: str
    family: str = "seed"  # "seed" or "evolved"
    image: bool = False  # returns a picture (for vision models)
    meta: dict[str, Any] = field(default_factory=dict)

    def openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def signature(self) -> str:
        """One line for the text protocol: name(arg: type = default, ...)."""
        parts = []
        required = set(self.parameters.get("required", []))
        for arg, schema in self.parameters.get("properties", {}).items():
            kind = schema.get("type", "any")
            text = f"{arg}: {kind}"
            if arg not in required:
                text += f" = {json.dumps(schema.get('default'))}"
            parts.append(text)
        return f"{self.name}({', '.join(parts)})"


class ToolSourceError(ValueError):
    """Tool source that cannot be turned into a ToolSpec (no function, bad name, syntax error)."""


def spec_from_source(source: str, *, family: str = "evolved", name: str | None = None) -> ToolSpec:
    """Parse (never run) tool source: the one public top-level function is the tool; helpers start with `_`.

    The JSON schema comes from the signature (type hints, defaults) and the Google-style docstring.
    """
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise ToolSourceError(f"syntax error: {exc}") from None
    functions = [n for n in module.body if isinstance(n, ast.FunctionDef)]
    public = [f for f in functions if not f.name.startswith("_")]
    if name is not None:
        public = [f for f in public if f.name == name]
    if len(public) != 1:
        found = ", ".join(f.name for f in public) or "none"
        raise ToolSourceError(f"the source must define exactly one public function (found: {found})")
    function = public[0]
    if not _NAME.match(function.name):
        raise ToolSourceError(f"bad tool name {function.name!r}")
    args = function.args
    if args.vararg or args.kwarg or args.posonlyargs:
        raise ToolSourceError("tool parameters must be plain named parameters (no *args, **kwargs, /)")
    doc = ast.get_docstring(function) or ""
    description, param_docs = _docstring_parts(doc)
    positional = args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    properties: dict[str, Any] = {}
    required = []
    for arg, default in pairs:
        schema, _nullable = _annotation_schema(arg.annotation)
        schema = dict(schema)
        if arg.arg in param_docs:
            schema["description"] = param_docs[arg.arg]
        if default is None:
            required.append(arg.arg)
        else:
            try:
                schema["default"] = ast.literal_eval(default)
            except ValueError:
                raise ToolSourceError(f"default of {arg.arg!r} must be a literal") from None
        properties[arg.arg] = schema
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return ToolSpec(function.name, description or function.name, parameters, source, family=family)


def _seed_spec(function) -> ToolSpec:
    spec = spec_from_source(inspect.getsource(function), family="seed")
    spec.image = spec.name in IMAGE_TOOLS
    return spec


_seed_lock = threading.Lock()
_seed_cache: dict[str, ToolSpec] = {}


def seed_specs() -> dict[str, ToolSpec]:
    """The seed tools, by name (parsed once per process)."""
    with _seed_lock:
        if not _seed_cache:
            for function in _SEED_FUNCTIONS:
                spec = _seed_spec(function)
                _seed_cache[spec.name] = spec
        return dict(_seed_cache)


def load_tools_dir(path: str | Path) -> list[ToolSpec]:
    """Evolved tools under `path`: `path/<name>/{tool.py, tool.json}` (or `path` itself being one tool)."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"tools folder not found: {root}")
    # A tools folder is a shared file too: a tool.py (or a tool's folder) linked to a host file is
    # refused, never parsed, so its text cannot reach a prompt (user_files.UserFolder).
    files = UserFolder(root, "tools", reader="--tools-dir", scope="--tools-dir")
    folders = (
        [root] if files.is_file(root / TOOL_FILE) else [p for p in files.listdir(root) if files.is_file(p / TOOL_FILE)]
    )
    specs = []
    for folder in folders:
        meta = files.read_json(folder / TOOL_JSON) if files.is_file(folder / TOOL_JSON) else {}
        if not isinstance(meta, dict):
            raise UserError(f"{files.label(folder / TOOL_JSON)}: not a JSON object (--tools-dir)")
        source = files.read_text(folder / TOOL_FILE)
        spec = spec_from_source(source, family="evolved", name=meta.get("name"))
        if meta.get("description"):
            spec.description = str(meta["description"])
        spec.meta = meta
        specs.append(spec)
    return specs
