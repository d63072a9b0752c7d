"""`tsbench evolve`: experience-driven capability evolution (TimeClaw §3.3).

From finished eval runs: successful episodes (score >= min_score) are grouped by category; for
each category the model sees a few of those trajectories (tool calls or code cells with their
observations and the answer given) and is asked to write ONE tool: a typed Python function with a
docstring whose body works on the workspace (`series`, `channels`, `L`, `TASK`, the seed tools,
numpy, scipy) and returns the task's answer object. The host only parses that source (`ast`);
it runs only inside the sandbox.

Verification, defined here: the candidate is called on held-out tasks of the same category, one
sandbox kernel for all of them. A tool may take required arguments (the paper's
`capm_regression(asset_channel, market_channel)`): its arguments for each held-out task come from
the source's `_verify_arguments(task)` helper, run in the kernel on that task (`task` is the kernel's
`TASK`; `series` and `channels` are the task's), or, without one, from binding each required
parameter by name to the task (`channel` -> the only channel; `<x>_channel` -> the channel named
<x>; a name in the task's meta -> that value); a parameter neither binds refuses the candidate.
The call is validated against the tool's schema like any call a model makes. Its output is then
checked against the task's answer: `_verify_answer(result, task)`, when the source defines it, turns
the tool's result into the final answer; otherwise the result itself is the answer. The answer is
decoded the fixed way, `json.dumps(value)` taken as the final message, and scored by the family's own
scorer against the gold; a task succeeds when that score is >= `success_threshold` (0.5 by default:
for AnomalyXL's window tasks an IoU of at least one half, for MCQ and class labels the exact answer).
A call that raises, times out or returns something unscorable fails that task. Held-out tasks are
rows of the train and val split files the run's task family finds beside the run's dataset files
(`TaskFamily.split_files`), never a test-split row, and never a row shown to the model; when there
are none of the category, evolve stops with an error that says so. The tool is admitted when its
held-out success rate exceeds gamma (0.7): strictly, as the paper words it (§3.3, "only if its
held-out success rate exceeds a threshold"; the authors' public code has no evolution loop to
compare with), or at gamma too with `admission="at-least"`. Admitted tools are written to
`<out>/<name>/{tool.py, tool.json}`, loadable with `--harness tools --tools <out>`; every candidate,
admitted or not, is recorded in `<out>/evolve_report.json`.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tsbench.harness.rlm import extract_code
from tsbench.harness.runtime.sandbox import Sandbox
from tsbench.harness.toolset import (
    TOOL_FILE,
    TOOL_JSON,
    Toolset,
    ToolSourceError,
    read_observation,
    seed_specs,
    spec_from_source,
    stumpy_cache_dir,
)
from tsbench.models.base import ChatModel, Message
from tsbench.results.records import transcript_events
from tsbench.tasks.base import SampleRef, TaskFamily

log = logging.getLogger(__name__)

GAMMA = 0.7
ADMISSION_RULES = ("strict", "at-least")


def admits(success_rate: float, gamma: float, rule: str = "strict") -> bool:
    """Whether a held-out success rate admits a tool: > gamma ("strict", the paper), >= ("at-least")."""
    if rule not in ADMISSION_RULES:
        raise ValueError(f"unknown admission rule {rule!r} (one of {', '.join(ADMISSION_RULES)})")
    return success_rate > gamma if rule == "strict" else success_rate >= gamma


VERIFY_SPLITS = ("train", "val")  # held-out tasks come from these splits only
SUCCESS_THRESHOLD = 0.5
REPORT = "evolve_report.json"

EVOLVE_SYSTEM = """You turn recurring successful analyses into reusable tools for a time-series agent.

A tool is ONE Python function, run inside a sandboxed kernel (never by you) where these are defined:
- `series`: dict {channel name: numpy float64 array}; `channels`: list of names; `L`: samples per channel
- `TASK`: dict with "category", "regime", "length", "channels" and "options" (the MCQ option texts, if any)
- numpy as `np`, `scipy`, and the seed tools as plain functions returning dicts:
{seed_tools}

Write the function with a type-hinted signature (a parameter without a literal default is required),
a docstring (a one-line summary, then an "Args:" section with one line per parameter), and a body
that computes from the workspace either the task's final answer (a dict in exactly the JSON format
the question asks for) or a reusable intermediate result (e.g. a regression's alpha and beta).
Helper functions are allowed if their names start with "_". Two helpers are read by verification,
which calls the tool on held-out tasks of this category:
- `_verify_arguments(task) -> dict`: the tool's arguments for one task, from `task` (the TASK dict)
  and the workspace; needed when a required parameter is not `channel` or `<name>_channel`;
- `_verify_answer(result, task) -> dict`: the task's final answer from the tool's result; needed
  when the tool returns an intermediate result rather than the answer.
Reply with the function (and helpers) in one ```python block and nothing else."""

EVOLVE_USER = """Category: {category}

A question of this category (the answer format is the part that matters):
{question}

Successful trajectories of this category (actions, observations, the answer given and its score):
{examples}

Write a tool named in snake_case for this recurring procedure; called on a new task of this
category (with the arguments `_verify_arguments` gives, or its defaults) it must return the answer dict,
or a result that `_verify_answer` turns into it."""


@dataclass
class HeldOutTask:
    id: str
    category: str
    regime: str
    question: str
    channel_names: list[str]
    values: Any
    options: list[str]
    gold: dict

    facts: dict[str, Any] = field(default_factory=dict)  # the task's meta (never gold)

    def meta(self) -> dict[str, Any]:
        return {
            "row_id": self.id,
            "category": self.category,
            "regime": self.regime,
            "length": int(self.values.shape[1]),
            "channels": list(self.channel_names),
            "options": list(self.options),
            "meta": dict(self.facts),
            "timestamps": self.facts.get("time_s"),
        }


@dataclass
class Candidate:
    category: str
    name: str | None = None
    admitted: bool = False
    success_rate: float = 0.0
    n_heldout: int = 0
    reason: str = ""
    results: list[dict[str, Any]] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    path: str | None = None


@dataclass
class EvolveReport:
    out: str
    gamma: float
    success_threshold: float
    model: str
    runs: list[str]
    candidates: list[Candidate] = field(default_factory=list)
    admission: str = "strict"  # ADMISSION_RULES

    @property
    def admitted(self) -> list[Candidate]:
        return [c for c in self.candidates if c.admitted]

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in asdict(self).items() if k != "candidates"},
            "candidates": [asdict(c) for c in self.candidates],
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }


# ----------------------------------------------------------------------------- the prompt --


def seed_tool_listing() -> str:
    return "\n".join(f"  - {spec.signature()}: {spec.description}" for spec in seed_specs().values() if not spec.image)


def _trajectory_text(sample: dict, max_steps: int = 8, chars: int = 600) -> str:
    from tsbench.timeclaw.bank import trajectory_steps

    steps = trajectory_steps(transcript_events(sample), max_chars=chars)
    lines = []
    for step in steps[:max_steps]:
        if "tool" in step:
            lines.append(f"  call {step['tool']}({json.dumps(step.get('arguments'))}) -> {step['observation']}")
        else:
            lines.append(f"  code:\n{step['code']}\n  output: {step['observation']}")
    if not lines:
        lines.append("  (answered without tools)")
    lines.append(f"  answer: {str(sample.get('final_message') or '')[:400]}  (score {float(sample['score']):.2f})")
    return "\n".join(lines)


def evolve_prompt(category: str, question: str, examples: list[dict]) -> list[Message]:
    shown = "\n\n".join(f"Example {i} ({e['id']}):\n{_trajectory_text(e)}" for i, e in enumerate(examples, 1))
    user = EVOLVE_USER.replace("{category}", category).replace("{question}", question).replace("{examples}", shown)
    return [Message("system", EVOLVE_SYSTEM.replace("{seed_tools}", seed_tool_listing())), Message("user", user)]


# ------------------------------------------------------------------------- verification --


ARGUMENTS_HELPER = "_verify_arguments"
ANSWER_HELPER = "_verify_answer"


def _helpers(source: str) -> set[str]:
    import ast

    return {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


def bind_arguments(spec, task: HeldOutTask) -> dict[str, Any]:
    """Arguments for the required parameters a source gives no `_verify_arguments` for, by name
    (see the module doc); raises ToolSourceError for a parameter that binds to nothing."""
    arguments: dict[str, Any] = {}
    names = list(task.channel_names)
    for parameter in spec.parameters.get("required", []):
        lowered = {n.lower(): n for n in names}
        if parameter == "channel" and len(names) == 1:
            arguments[parameter] = names[0]
        elif parameter.endswith("_channel") and parameter[: -len("_channel")].lower() in lowered:
            arguments[parameter] = lowered[parameter[: -len("_channel")].lower()]
        elif parameter in task.facts:
            arguments[parameter] = task.facts[parameter]
        else:
            raise ToolSourceError(
                f"required parameter {parameter!r} binds to nothing in held-out task {task.id}; "
                f"define {ARGUMENTS_HELPER}(task) to give the tool's arguments"
            )
    return arguments


def verify_tool(
    source: str,
    tasks: list[HeldOutTask],
    family: TaskFamily,
    *,
    success_threshold: float = SUCCESS_THRESHOLD,
    cell_timeout_s: float = 120.0,
    memory_bytes: int = 4 * 2**30,
) -> list[dict[str, Any]]:
    """Call a candidate tool (source) on each held-out task in one sandbox kernel, with arguments
    derived from the task, and score its answer with the family's scorer (see the module doc).
    Never runs the source in this process."""
    spec = spec_from_source(source, family="evolved")
    if spec.name in seed_specs():
        raise ToolSourceError(f"the tool name {spec.name!r} is taken by a seed tool")
    helpers = _helpers(source)
    binds = ARGUMENTS_HELPER in helpers
    if not binds:  # refuse before any kernel starts when a required parameter cannot be bound
        for task in tasks:
            bind_arguments(spec, task)
    toolset = Toolset.build(extra=[spec])
    union = {
        f"{index}::{name}": values
        for index, task in enumerate(tasks)
        for name, values in zip(task.channel_names, task.values)
    }
    placeholder = tasks[0].meta()
    results = []
    cache = stumpy_cache_dir()  # discords' compiled functions, read-only in the jail
    with Sandbox(
        union,
        cell_timeout_s=cell_timeout_s,
        memory_bytes=memory_bytes,
        readonly_paths=[cache] if cache.is_dir() else [],
    ) as sandbox:
        install = toolset.install_code(placeholder, numba_cache=str(stumpy_cache_dir()), verification=True)
        install += (f"_TC_TOOLS['__arguments'] = lambda: {ARGUMENTS_HELPER}(dict(TASK))\n" if binds else "") + (
            f"_TC_TOOLS['__answer'] = lambda arguments: {ANSWER_HELPER}(_TC_TOOLS[{spec.name!r}](**arguments), "
            "dict(TASK))\n"
            if ANSWER_HELPER in helpers
            else ""
        )
        setup = sandbox.run(install)
        if setup.error:
            raise RuntimeError(f"installing the tools failed: {setup.error[-1000:]}")

        def call(name: str, arguments: dict[str, Any], index: int, task: HeldOutTask):
            code = f"_tc_select({index}, _tc_json.loads({json.dumps(task.meta())!r}))\n" + Toolset.call_code(
                name, arguments
            )
            cell = sandbox.run(code)
            if cell.restarted:
                sandbox.run(install)
            return cell, read_observation(cell, 100_000)

        for index, task in enumerate(tasks):
            entry: dict[str, Any] = {"id": task.id}
            seconds = 0.0
            problem = None
            if binds:
                cell, found = call("__arguments", {}, index, task)
                seconds += cell.seconds
                arguments = found.data if not found.error else None
                if found.error:
                    problem = f"{ARGUMENTS_HELPER}: " + json.loads(found.text).get("error", "")
                elif not isinstance(arguments, dict):
                    problem = f"{ARGUMENTS_HELPER} returned {type(arguments).__name__}, not a dict"
            else:
                arguments = bind_arguments(spec, task)
            if problem is None:
                problem = toolset.validate(spec.name, arguments)
            observation = None
            if problem is None:
                entry["arguments"] = arguments
                answer_call = ANSWER_HELPER in helpers
                cell, observation = call(
                    "__answer" if answer_call else spec.name,
                    {"arguments": arguments} if answer_call else arguments,
                    index,
                    task,
                )
                seconds += cell.seconds
                if observation.error:
                    problem = json.loads(observation.text).get("error", "")
            entry["seconds"] = round(seconds, 3)
            if problem is not None:
                entry.update(score=0.0, success=False, error=str(problem)[:500])
            else:
                final = json.dumps(observation.data)
                scored = family.score(task.category, task.gold, final)
                entry.update(
                    score=float(scored.score),
                    success=bool(scored.valid and scored.score >= success_threshold),
                    answer=final[:300],
                    valid=bool(scored.valid),
                )
            results.append(entry)
    return results


# ------------------------------------------------------------------------------ the loop --


def verification_files(family: TaskFamily, files: list[Path]) -> list[Path]:
    """The train and val files the family finds beside a run's dataset files."""
    found = [f for split in VERIFY_SPLITS for f in family.split_files([str(f) for f in files], split)]
    if not found:
        where = ", ".join(sorted({str(f if f.is_dir() else f.parent) for f in map(Path, files)}))
        raise ValueError(
            f"evolve verifies tools on train/val rows, but {where} holds no {family.name} train or val "
            "split; write them beside the run's data (e.g. `tsbench generate --split all`)"
        )
    return list(dict.fromkeys(found))


def _held_out(
    family: TaskFamily, files: list[Path], category: str, exclude: set[str], limit: int, seed: int
) -> list[HeldOutTask]:
    index = family.index(files, {})
    index = index[(index["category"] == category) & ~index["id"].isin(exclude)].drop_duplicates("id")
    paths = dict(zip(index["id"].astype(str), index["path"].astype(str)))
    ids = sorted(paths)
    random.Random(f"{seed}:{category}").shuffle(ids)
    tasks = []
    for task_id in ids:
        if len(tasks) == limit:
            break
        sample = family.load(SampleRef(family.name, paths[task_id], task_id))
        task = sample.task
        if sample.columns.get("split") not in VERIFY_SPLITS or task.values is None:
            continue  # a family whose every split file is one file: only its train/val rows verify
        tasks.append(
            HeldOutTask(
                task.row_id,
                task.category,
                task.regime,
                task.question,
                list(task.channel_names),
                task.values,
                list(task.options),
                sample.gold,
                dict(task.meta),
            )
        )
    return tasks


def _question_of(family: TaskFamily, files: list[Path], task_id: str) -> str:
    from tsbench.timeclaw.build import load_samples_by_id

    found = load_samples_by_id(family, [f for f in files if not f.is_dir()], {task_id})
    return found[task_id].task.question if task_id in found else ""


def evolve_tools(
    from_runs,
    model: ChatModel,
    out: str | Path,
    gamma: float = GAMMA,
    *,
    min_score: float = 0.5,
    success_threshold: float = SUCCESS_THRESHOLD,
    examples_per_category: int = 3,
    max_heldout: int = 10,
    min_heldout: int = 3,
    categories: list[str] | None = None,
    data: list[str] | None = None,
    max_tokens: int | None = 2048,
    temperature: float | None = None,
    cell_timeout_s: float = 120.0,
    memory_bytes: int = 4 * 2**30,
    seed: int = 0,
    include_test_split: bool = False,
    admission: str = "strict",
) -> EvolveReport:
    """Propose one tool per category of the runs' successful trajectories, verify each on held-out
    tasks in the sandbox, admit those whose success rate exceeds gamma (`admission`) into `out`."""
    admits(0.0, gamma, admission)  # an unknown rule fails before any model call
    from tsbench.timeclaw.build import _as_list, run_data_files, run_family, successful_rows

    runs = _as_list(from_runs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = EvolveReport(
        out=str(out),
        gamma=gamma,
        success_threshold=success_threshold,
        model=getattr(model, "name", "?"),
        runs=[str(r) for r in runs],
        admission=admission,
    )
    chosen = successful_rows(runs, min_score, include_test_split)
    taken = set(seed_specs()) | {p.name for p in out.iterdir() if (p / TOOL_FILE).is_file()}
    if chosen.empty:
        log.warning("no successful trajectories (score >= %s) in %s", min_score, runs)
    for category, group in [] if chosen.empty else chosen.groupby("category", sort=True):
        if categories and category not in categories:
            continue
        examples = group.head(examples_per_category).to_dict("records")
        candidate = Candidate(category=category, examples=[e["id"] for e in examples])
        report.candidates.append(candidate)
        family = run_family(examples[0]["run"])
        files = sorted({f for run in {e["run"] for e in examples} for f in run_data_files(run, data)})
        tasks = _held_out(
            family, verification_files(family, files), category, {e["id"] for e in examples}, max_heldout, seed
        )
        candidate.n_heldout = len(tasks)
        if len(tasks) < min_heldout:
            candidate.reason = f"only {len(tasks)} held-out task(s) (need {min_heldout})"
            continue
        completion = model.generate(
            evolve_prompt(category, _question_of(family, files, examples[0]["id"]), examples),
            max_tokens=max_tokens,
            temperature=temperature,
        )
        blocks = extract_code(completion.text)
        if not blocks:
            candidate.reason = "the reply held no ```python block"
            continue
        judge_candidate(
            candidate,
            blocks[0],
            tasks,
            family,
            out,
            report,
            taken,
            success_threshold=success_threshold,
            cell_timeout_s=cell_timeout_s,
            memory_bytes=memory_bytes,
        )
    (out / REPORT).write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    return report


def judge_candidate(
    candidate: Candidate,
    source: str,
    tasks: list[HeldOutTask],
    family: TaskFamily,
    out: Path,
    report: EvolveReport,
    taken: set[str],
    *,
    success_threshold: float = SUCCESS_THRESHOLD,
    cell_timeout_s: float = 120.0,
    memory_bytes: int = 4 * 2**30,
) -> Candidate:
    """Verify one candidate's source on the held-out tasks and admit it by `report.gamma` and
    `report.admission`: an admitted tool is written under `out` and its name added to `taken`."""
    try:
        spec = spec_from_source(source, family="evolved")
        candidate.name = spec.name
        if spec.name in taken:
            raise ToolSourceError(f"the tool name {spec.name!r} is already taken")
        candidate.results = verify_tool(
            source,
            tasks,
            family,
            success_threshold=success_threshold,
            cell_timeout_s=cell_timeout_s,
            memory_bytes=memory_bytes,
        )
    except (ToolSourceError, RuntimeError) as exc:
        candidate.reason = str(exc)
        return candidate
    successes = sum(r["success"] for r in candidate.results)
    candidate.n_heldout = len(candidate.results)
    candidate.success_rate = successes / len(candidate.results)
    candidate.admitted = admits(candidate.success_rate, report.gamma, report.admission)
    bound = ">" if report.admission == "strict" else ">="
    candidate.reason = (
        f"{successes}/{len(candidate.results)} held-out tasks scored >= {success_threshold}; "
        f"{'admitted' if candidate.admitted else 'rejected'} (admitted when the rate is {bound} gamma = {report.gamma})"
    )
    if candidate.admitted:
        candidate.path = str(_save_tool(out, spec.name, source, spec.description, spec.parameters, candidate, report))
        taken.add(spec.name)
    return candidate


def _save_tool(
    out: Path, name: str, source: str, description: str, parameters: dict, candidate: Candidate, report: EvolveReport
) -> Path:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TOOL_FILE).write_text(source if source.endswith("\n") else source + "\n")
    meta = {
        "name": name,
        "description": description,
        "parameters": parameters,
        "category": candidate.category,
        "success_rate": candidate.success_rate,
        "n_heldout": candidate.n_heldout,
        "gamma": report.gamma,
        "admission": report.admission,
        "success_threshold": report.success_threshold,
        "examples": candidate.examples,
        "heldout": [r["id"] for r in candidate.results],
        "model": report.model,
        "runs": report.runs,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (folder / TOOL_JSON).write_text(json.dumps(meta, indent=2, ensure_ascii=False))
    return folder
