"""The file agent's prompt text (paper A.5.1): sandbox instruction, memory instruction, skill-index
block, the compaction request, and the notices a period may need."""

from __future__ import annotations

SYSTEM = """You are {role}. All files you need are in the CURRENT WORKING DIRECTORY. The cwd contains:
* timeseries.csv -- the historical data series
* answer_schema.json -- required JSON shape for your answer
* gt_source/<prior>.* -- prior-period reports

Available tools:
* Python code execution: put Python in a fenced ```python block; every block of a reply runs in order in a
  persistent kernel and you see its printed output, the last expression's value and any error. Variables
  persist within a period; each period starts a fresh kernel with that period's files.
* final_answer(answer=<dict>, report=<str>) -- submit your final output. You must call this tool exactly once,
  inside a code block, to finish. Do not write the answer to a file. Do not emit a final textual reply instead
  of calling the tool.{extra_tools}

Sandbox rules:
Available libraries: pandas, numpy, scipy, json, csv, re, math, statistics, datetime, pathlib, io, collections,
itertools, functools. There is no network.
File / IO:
* Read CSV: pd.read_csv('timeseries.csv')
* Read text: Path('x.md').read_text()
* Read JSON: json.loads(Path('answer_schema.json').read_text())
* List dir: [p.name for p in Path('gt_source').iterdir()]

Scenario tier: {tier}
Required answer keys: {required_keys}
Task rules:
1. Read the CSV and prior-period gt_source files if needed. Do not hallucinate values.
2. Never cite or read the current period's gt_source. Only prior-period source documents are allowed.
3. Your final answer dict must contain exactly the required keys. Your report must cite specific CSV cells or
prior-period files.
4. End your run by calling final_answer(answer=..., report=...).
You have at most {steps} replies per period."""

COMPACTION_TOOL = """
* request_memory_compaction(reason=<str>) -- ask for your memory to be summarised and reset at the next
  period boundary."""

SKILL_TOOLS = """
* induct_skill(name=<str>, description=<str>, notes=<str>, code=<str>) -- save a small reusable function
  (`code` must define a function called `name`); after a light check it becomes a callable tool from the
  NEXT period.
* retrieve_skill(name=<str>) -- the notes and full code of a saved skill."""

MEMORY_INSTRUCTION = (
    "Memory management is optional in multi-period episodes. If your conversation memory becomes bloated with "
    "failed code attempts, long observations, or patterns already learned, you may call "
    "request_memory_compaction(reason=...). The framework will summarize what you have learned across past "
    "periods after the current period finishes, then reset memory to that summary before the next period. Do not "
    "call this for a single-period task."
)

SKILLS_EMPTY = (
    "No skills have been saved yet for this sweep. You are the first agent to run. If you write a small, reusable "
    "idiom this period (a schema-specific CSV loader, a date-to-period converter, a band classifier, a row lookup), "
    "save it with induct_skill so later periods can call it as a tool. Good candidates: small single-purpose "
    "functions returning a clean Python value. Bad candidates: scenario-specific one-off math, or the literal "
    "answer dict. Induct the skill BEFORE calling final_answer, while the code is fresh."
)

SKILLS_INDEX = """=== Available skills ===
The following skills are already registered as tools for this period. INVOKE THESE SKILLS -- do NOT re-implement
a listed skill inline. Reuse is faster, less error-prone, and consistent across periods.
Example call: result = {first}(...)
Skills:
{listing}
Use retrieve_skill(name=...) to read a skill's notes and full code before invoking if its description is not
clear enough. If you find a new reusable idiom this period, save it with induct_skill."""

COMPACTION_REQUEST = (
    "MEMORY COMPACTION. Your memory is about to be reset. Write the summary you will continue from, with no code: "
    "(1) the CSV layout (columns, units, date format); (2) working code idioms, as short snippets; (3) answer-schema "
    "pitfalls; (4) patterns in the feedback scores; (5) a one-line recap per past period (period, answer, scores)."
)
COMPACTED = "Summary of your earlier periods (your memory was compacted):\n{summary}"

NO_CODE = (
    "No code block found. Act by writing Python in a ```python block; finish by calling "
    "final_answer(answer=..., report=...) inside one."
)
LAST_STEP = (
    "LAST STEP: this is your final reply for this period. Call final_answer(answer=..., report=...) in a "
    "code block now; a period that ends without it is scored as a failure."
)


def system_prompt(meta: dict, *, steps: int, sequential: bool, skills: bool) -> str:
    extra = (COMPACTION_TOOL if sequential else "") + (SKILL_TOOLS if skills else "")
    role = meta.get("role", "data analyst")
    article = "an " if role[:1].lower() in "aeiou" else "a "
    return SYSTEM.format(
        role=article + role,
        extra_tools=extra,
        tier=meta.get("tier", "?"),
        required_keys=", ".join(meta.get("required_keys", [])),
        steps=steps,
    )


def skill_block(skills: list[tuple[str, str]]) -> str:
    if not skills:
        return SKILLS_EMPTY
    listing = "\n".join(f"- {name} -- {description}" for name, description in skills)
    return SKILLS_INDEX.format(first=skills[0][0], listing=listing)
