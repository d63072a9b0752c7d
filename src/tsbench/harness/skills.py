"""TimeSage-1.0's skill library: the light check that admits a skill, and the library itself.

A skill (`induct_skill(name, description, notes, code)`) is admitted only if (paper A.6.2):
- it is a self-contained callable: `code` alone, run in a fresh namespace in the jail, defines a
  function `name` (a valid, unreserved identifier);
- its signature is usable and it runs on the period's files: called with nothing, the CSV path,
  the table, a column, a number or the schema path, one of these calls returns within the limit;
- its description is faithful: three or more words sharing a word with its name or code;
- it is no duplicate of a registered skill (same name, or the same code);
- it does not return the literal answer: no `return {...}` of constants keyed by required answer
  keys, and no return value equal to the submitted answer on two or more keys whose values the
  code spells out as constants.
Admitted skills are registered in the kernel from the NEXT period on, never the current one.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from tsbench.harness.file_agent_kernel import TOOL_NAMES

CHECK_LIMIT_S = 10.0
MAX_CODE_CHARS = 20_000


@dataclass
class Skill:
    name: str
    description: str
    notes: str
    code: str
    period: str  # the period it was induced in
    signature: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description, "notes": self.notes, "code": self.code}


@dataclass
class SkillLibrary:
    skills: list[Skill] = field(default_factory=list)

    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    def add(self, skill: Skill) -> None:
        self.skills.append(skill)


def _normal_code(code: str) -> str:
    try:
        return ast.dump(ast.parse(code))
    except SyntaxError:
        return re.sub(r"\s+", " ", code).strip()


def _constants(node: ast.AST) -> list[Any]:
    """Every literal the code spells out (a negative number counts as itself)."""
    found = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant)]
    found += [
        -n.operand.value
        for n in ast.walk(node)
        if isinstance(n, ast.UnaryOp)
        and isinstance(n.op, ast.USub)
        and isinstance(n.operand, ast.Constant)
        and isinstance(n.operand.value, (int, float))
    ]
    return found


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False
    return True


def _literal_dict_returns(tree: ast.AST, required: set[str]) -> bool:
    """A `return {...}` whose keys include two or more required answer keys and whose values are
    all literals (numbers, strings, lists or dicts of them)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
            if len(keys & required) >= 2 and all(_is_literal(v) for v in node.value.values):
                return True
    return False


def static_problems(
    candidate: dict[str, str], library: SkillLibrary, admitted_now: list[Skill], required_keys: list[str]
) -> list[str]:
    """Why a candidate fails before it is run (empty: run it)."""
    name, description, code = candidate["name"], candidate["description"], candidate["code"]
    problems = []
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        problems.append(f"{name!r} is not a usable function name")
    if name in TOOL_NAMES or hasattr(builtins, name):
        problems.append(f"{name!r} is reserved")
    if len(code) > MAX_CODE_CHARS:
        problems.append(f"code longer than {MAX_CODE_CHARS} characters")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return problems + [f"code does not parse: {exc.msg} (line {exc.lineno})"]
    except (RecursionError, MemoryError):  # nested past what the parser takes
        return problems + ["code does not parse: nested too deeply"]
    if not any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body):
        problems.append(f"code does not define a top-level function {name!r}")
    words = re.findall(r"[a-z]{3,}", description.lower())
    names = set(re.findall(r"[a-z]{3,}", (name + " " + code).lower().replace("_", " ")))
    if len(description.split()) < 3 or not set(words) & names:
        problems.append("the description is too short or says nothing about what the code does")
    existing = library.skills + admitted_now
    if any(s.name == name for s in existing):
        problems.append(f"duplicate: a skill named {name!r} exists")
    elif any(_normal_code(s.code) == _normal_code(code) for s in existing):
        problems.append("duplicate: the same code is registered under another name")
    if _literal_dict_returns(tree, set(required_keys)):
        problems.append("returns the literal answer dict")
    return problems


def returns_literal_answer(value: Any, code: str, answer: dict | None) -> bool:
    """The run's return value equals the submitted answer on >= 2 keys whose values the code
    writes as constants."""
    if not isinstance(value, dict) or not isinstance(answer, dict):
        return False
    try:
        constants = _constants(ast.parse(code))
    except SyntaxError:
        return False
    same = [k for k in answer if k in value and value[k] == answer[k]]
    spelled = [
        k
        for k in same
        if answer[k] in constants or (isinstance(answer[k], list) and all(x in constants for x in answer[k]))
    ]
    return len(spelled) >= 2


def decide(candidate: dict[str, str], run: dict[str, Any] | None, answer: dict | None) -> list[str]:
    """Problems found by running the candidate in the jail (empty: admit)."""
    if not isinstance(run, dict):  # none came, or the candidate printed a marked line of its own
        return ["the check could not run in the kernel"]
    if not run.get("ok"):
        listed = run.get("errors")
        errors = (
            "; ".join(str(e) for e in (listed if isinstance(listed, list) else [])[:2])
            or "it could not be called on the period's files"
        )
        return [f"does not run on the period's files: {errors}"]
    if returns_literal_answer(run.get("value"), candidate["code"], answer):
        return ["returns the literal answer dict"]
    return []
