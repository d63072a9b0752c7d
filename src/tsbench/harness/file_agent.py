"""The file agent: TimeSage-EV's code agent (paper A.5.1, A.6), in the kernel sandbox.

Each period runs in a fresh kernel whose working directory receives the period's files (the
table cut at the cutoff, the schema, prior releases; never the truth or the target release).
The model acts by writing Python in fenced blocks; tools are functions in the kernel:
`final_answer(answer=dict, report=str)` ends the period, `request_memory_compaction(reason)`
(sequential mode) and `induct_skill` / `retrieve_skill` (the skill library). A period has
`period_steps` replies and `period_wall_s` seconds; one that ends without final_answer is a
failure of the agent (scored, not an error row).

- independent: every period starts from the system prompt alone.
- sequential: the conversation carries across a scenario's periods; before each period the
  agent reads the previous period's four scores; at a period boundary, when the agent asked or
  the last step's input exceeded `compaction_tokens`, one call to the agent's own model writes a
  summary and the conversation restarts from it.
- skills (TimeSage-1.0): the library persists across the chain; skills pass a light check at the
  end of the period that induced them and are registered from the next period on.

`run_file_agent` plays one period (the `file-agent` harness); `run_chain` plays a scenario's
periods in order, calling `after(i, outcome)` for the feedback text between periods. A period is a
`TurnLoop` (harness/loop.py): the forced last step, caps, spending and cut replies are the loop's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from tsbench.core.episode import EpisodeOutcome, EpisodeResult, EpisodeTask, end_if_kernel_lost
from tsbench.core.settings import setting
from tsbench.core.text import strip_reasoning
from tsbench.harness import file_agent_kernel as kernel
from tsbench.harness import file_agent_prompts as prompts
from tsbench.harness.accounting import spending
from tsbench.harness.base import After, Harness
from tsbench.harness.loop import TurnLoop, add_notice
from tsbench.harness.play import episode_outcome
from tsbench.harness.rlm import extract_code
from tsbench.harness.runtime.sandbox import Sandbox, SandboxError, truncate_observation
from tsbench.harness.settings import HarnessSettings
from tsbench.harness.skills import CHECK_LIMIT_S, Skill, SkillLibrary, decide, static_problems
from tsbench.models.base import Agent, Completion, Message


@dataclass
class FileAgentSettings(HarnessSettings):
    """[file-agent]: TimeSage-EV's file agent, the paper's per-period limits and modes."""

    SECTION: ClassVar[str] = "file-agent"

    mode: str = setting(
        "independent",
        "TimeSage: independent (fresh state each period) or sequential (state, "
        "score feedback and compaction carried across a scenario's periods).",
        choices=("independent", "sequential"),
    )
    skills: bool = setting(
        False, "TimeSage: the TimeSage-1.0 skill library (induct_skill / retrieve_skill, usable from the next period)."
    )
    period_steps: int = setting(20, "TimeSage: model replies per period.", ge=1)
    period_wall_s: float = setting(
        2700.0, "TimeSage: seconds per period; past it the period ends without an answer.", gt=0
    )
    compaction_tokens: int = setting(
        64_000,
        "TimeSage sequential: compact memory at the next period boundary once a step's input exceeds this.",
        ge=1,
    )

    def name_suffix(self) -> str:
        return (f"__{self.mode}" if self.mode != "independent" else "") + ("__skills" if self.skills else "")


class Session:
    """One agent's state across the periods it plays (a single period in independent mode)."""

    def __init__(self, model: Agent, cfg: FileAgentSettings, *, sequential: bool, skills: bool):
        self.model = model
        self.cfg = cfg
        self.sequential = sequential
        self.skills_enabled = skills
        self.library = SkillLibrary()
        self.messages: list[Message] = []
        self.feedback: str | None = None
        self.compaction_requested = False
        self.last_input_tokens = 0

    def play(self, task: EpisodeTask) -> EpisodeResult:
        """One period."""
        return Period(self, task).run()

    def _open_period(self, task: EpisodeTask, result: EpisodeResult, facts: dict) -> None:
        """Compact at the boundary if due (sequential), start or continue the conversation, and
        add the period's prompt (feedback, skill index, question, memory instruction)."""
        system = prompts.system_prompt(
            task.meta, steps=self.cfg.period_steps, sequential=self.sequential, skills=self.skills_enabled
        )
        if self.sequential and self.messages and self._compaction_due():
            self._compact(task, result, facts, system)
        if not (self.sequential and self.messages):
            self.messages = [Message("system", system)]
            result.transcript.append({"role": "system", "content": system})
        self._add_user(self._period_prompt(task), result)
        self.feedback = None

    def end_period(self, feedback: str | None) -> None:
        """Between periods: remember the feedback for the next period's prompt (sequential)."""
        self.feedback = feedback if self.sequential else None

    # ---- prompts and memory

    def _meta(self, phase: str) -> dict:
        return {
            "harness": "file-agent",
            "phase": phase,
            "sequential": self.sequential,
            "skills_enabled": self.skills_enabled,
            "skills": self.library.names(),
        }

    def _period_prompt(self, task: EpisodeTask) -> str:
        parts = []
        if self.feedback:
            parts.append(self.feedback)
        if self.skills_enabled:
            parts.append(prompts.skill_block([(s.name, s.description) for s in self.library.skills]))
        parts.append(task.question)
        if self.sequential:
            parts.append(prompts.MEMORY_INSTRUCTION)
        return "\n\n".join(parts)

    def _add_user(self, text: str, result: EpisodeResult, role: str = "user", turn: int | None = None) -> None:
        add_notice(self.messages, text)
        event = {"role": role, "content": text} if role == "user" else {"role": role, "turn": turn, "observation": text}
        result.transcript.append(event)

    def _compaction_due(self) -> bool:
        return self.compaction_requested or self.last_input_tokens > self.cfg.compaction_tokens

    def _compact(self, task: EpisodeTask, result: EpisodeResult, facts: dict, system: str) -> None:
        """One call to the agent's own model summarises; the conversation restarts from it."""
        reason = (
            "requested by the agent"
            if self.compaction_requested
            else (f"the last step's input ({self.last_input_tokens} tokens) exceeded {self.cfg.compaction_tokens}")
        )
        request = self.messages + [
            Message("user", (self.feedback + "\n\n" if self.feedback else "") + prompts.COMPACTION_REQUEST)
        ]
        info = replace(task.info(code_execution=False), meta={**task.meta, **self._meta("compaction")})
        with spending(result):
            completion = self.model.generate(
                request, max_tokens=self.cfg.max_tokens, temperature=self.cfg.temperature, task=info
            )
        result.add_completion(completion)
        summary = strip_reasoning(completion.text).strip()
        self.messages = [Message("system", system), Message("user", prompts.COMPACTED.format(summary=summary))]
        self.compaction_requested = False
        self.last_input_tokens = 0
        facts["compacted"] = 1
        result.transcript += [
            {
                "role": "compaction",
                "reason": reason,
                "summary": summary,
                "input_tokens": completion.input_tokens,
                "output_tokens": completion.output_tokens,
            },
            {"role": "system", "content": system},
            {"role": "user", "content": self.messages[-1].content},
        ]

    # ---- the kernel

    def _prepare(self, sandbox: Sandbox, task: EpisodeTask) -> None:
        for code in [*kernel.file_cells(task.files), kernel.tools_cell(self.skills_enabled, self.sequential)]:
            self._setup(sandbox, code)
        if self.skills_enabled and self.library.skills:
            self._setup(sandbox, kernel.register_cell([s.as_dict() for s in self.library.skills]))

    @staticmethod
    def _setup(sandbox: Sandbox, code: str) -> None:
        cell = sandbox.run(code)
        if cell.error or cell.timed_out:
            raise SandboxError(f"could not prepare the period's kernel: {cell.error or 'timed out'}"[:2000])

    def _harvest(self, sandbox: Sandbox, facts: dict) -> dict | None:
        """Read the tools' events; the first final_answer of the period, if any."""
        cell = sandbox.run(kernel.HARVEST_CELL)
        events = kernel.parse_marked(cell.stdout, kernel.EVENT_MARK)
        final = None
        for event in events if isinstance(events, list) else []:  # model code can rewrite _tsb_events
            kind = event.get("type") if isinstance(event, dict) else None
            if kind == "final_answer" and final is None:
                final = event
            elif kind == "compaction":
                self.compaction_requested = True
            elif kind == "induct" and all(
                isinstance(event.get(k), str) for k in ("name", "description", "notes", "code")
            ):
                facts.setdefault("candidates", []).append(event)
            elif kind == "retrieve":
                facts["retrieved"].append(event.get("name"))
            elif kind == "skill_call":
                facts["invoked"].append(event.get("name"))
        return final

    def _check_skills(
        self, sandbox: Sandbox, task: EpisodeTask, facts: dict, final: dict | None, result: EpisodeResult
    ) -> None:
        """The light check for this period's candidates; admitted skills join the library, usable
        from the next period (the current kernel never registers them)."""
        answer = final.get("answer") if final else None
        admitted: list[Skill] = []
        defined = False
        for candidate in facts.get("candidates", []):
            problems = static_problems(candidate, self.library, admitted, task.meta.get("required_keys", []))
            run = None
            if not problems:
                if not defined:
                    self._setup(sandbox, kernel.CHECK_CELL)
                    defined = True
                cell = sandbox.run(kernel.check_call(candidate["name"], candidate["code"], CHECK_LIMIT_S))
                run = kernel.parse_marked(cell.stdout, kernel.CHECK_MARK)
                problems = decide(candidate, run, answer)
            if problems:
                facts["rejected"][candidate["name"]] = "; ".join(problems)
            else:
                admitted.append(
                    Skill(
                        candidate["name"],
                        candidate["description"],
                        candidate["notes"],
                        candidate["code"],
                        task.meta.get("period", ""),
                        (run or {}).get("signature", ""),
                    )
                )
            result.transcript.append(
                {"role": "skill_check", "name": candidate["name"], "admitted": not problems, "problems": problems}
            )
        for skill in admitted:
            self.library.add(skill)
        facts["induced"] = [s.name for s in admitted]

    @staticmethod
    def _record(result: EpisodeResult, facts: dict, final: dict | None) -> None:
        """Per-period facts for the results row (attributes are strings, metrics numbers)."""
        result.attributes.update(
            {
                "skills_induced": ",".join(facts["induced"]),
                "skills_invoked": ",".join(sorted(set(facts["invoked"]))),
                "skills_rejected": json.dumps(facts["rejected"]) if facts["rejected"] else "",
                "compacted": str(facts["compacted"]),
                "final_answer": "yes" if final is not None else "no",
            }
        )
        result.metrics.update(
            {
                "steps": float(result.turns),
                "skills_induced": float(len(facts["induced"])),
                "skills_rejected": float(len(facts["rejected"])),
                "skill_calls": float(len(facts["invoked"])),
                "skills_retrieved": float(len(facts["retrieved"])),
                "compactions": float(facts["compacted"]),
                "tokens": float(result.input_tokens + result.output_tokens),
            }
        )


class _Kernel:
    """The period's sandbox, started (with the period's files, tools and skills) at the first code
    the agent writes: a period of prose alone never starts a kernel."""

    def __init__(self, session: Session, task: EpisodeTask):
        self.session, self.task = session, task
        self.sandbox: Sandbox | None = None

    def get(self) -> Sandbox:
        if self.sandbox is None:
            self.sandbox = Sandbox({}, **self.session.cfg.kernel_limits())
            self.sandbox.start()
            self.session._prepare(self.sandbox, self.task)
        return self.sandbox

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None

    def __enter__(self) -> _Kernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Period(TurnLoop):
    """One period as a turn loop: code blocks are the actions, the kernel's output and the tools'
    events the environment's response; a final_answer call ends the period."""

    final_notice = prompts.LAST_STEP
    last_reply_acts = True  # final_answer is code: the last step's code still runs
    unit = "period"

    def __init__(self, session: Session, task: EpisodeTask):
        super().__init__(session.model, task, session.cfg, replies=session.cfg.period_steps)
        self.session = session
        self.deadline = self.started + session.cfg.period_wall_s  # cells are cut at it; a later answer does not count
        self.facts: dict[str, Any] = {"compacted": 0, "induced": [], "rejected": {}, "invoked": [], "retrieved": []}
        self.kernel = _Kernel(session, task)
        self.final: dict | None = None

    def environment(self):
        return self.kernel

    def open(self) -> None:
        self.session._open_period(self.task, self.result, self.facts)
        self.messages = self.session.messages  # one list: what the period adds, the session keeps

    def stopped(self) -> bool:
        if time.monotonic() - self.started < self.cfg.period_wall_s:
            return False
        self.result.transcript.append(
            {
                "role": "notice",
                "content": f"period wall clock {self.cfg.period_wall_s:g} s reached without final_answer",
            }
        )
        return True

    def info(self):
        return replace(self.task.info(code_execution=True), meta={**self.task.meta, **self.session._meta("period")})

    def ask(self, turn: int, last: bool) -> Completion:
        completion = super().ask(turn, last)
        self.session.last_input_tokens = completion.input_tokens
        return completion

    def actions(self, completion: Completion, turn: int) -> list[str]:
        return extract_code(completion.text)

    def no_action(self, completion: Completion, turn: int, last: bool) -> bool:
        self.session._add_user(prompts.NO_CODE, self.result, role="tool", turn=turn)
        return False

    def respond(self, completion: Completion, actions: list[str], turn: int) -> bool:
        sandbox, result, cfg = self.kernel.get(), self.result, self.cfg
        final, outputs, cells = None, [], []
        for code in actions:
            cell = sandbox.run(code, timeout_s=self.deadline - time.monotonic())
            result.code_cells += 1
            outputs.append(cell.observation(max_chars=10 * cfg.observation_chars))
            cells.append(
                {
                    "code": code,
                    "timed_out": cell.timed_out,
                    "restarted": cell.restarted,
                    "seconds": round(cell.seconds, 3),
                }
            )
            if cell.restarted:  # the row is an error (the cell is kept in its transcript)
                result.transcript.append({"role": "tool", "turn": turn, "cells": cells})
                end_if_kernel_lost(cell, result)
            final = self.session._harvest(sandbox, self.facts)
            if final is not None:
                break
        observation = truncate_observation(
            "Output:\n" + ("\n".join(o for o in outputs if o) or "(no output)"), cfg.observation_chars
        )
        self.messages.append(Message("user", observation))
        result.transcript.append({"role": "tool", "turn": turn, "cells": cells, "observation": observation})
        if final is not None and time.monotonic() > self.deadline:
            result.transcript.append(
                {
                    "role": "notice",
                    "content": "final_answer came after the period "
                    f"wall clock of {cfg.period_wall_s:g} s and does not count",
                }
            )
            final = None
            return True
        self.final = final
        return final is not None

    def finish(self) -> None:
        if self.session.skills_enabled and self.facts.get("candidates"):
            self.session._check_skills(self.kernel.get(), self.task, self.facts, self.final, self.result)

    def run(self) -> EpisodeResult:
        result = super().run()
        final = self.final
        if final is not None:
            result.final_message = json.dumps(
                {"answer": final.get("answer"), "report": final.get("report")}, ensure_ascii=False
            )
        else:
            result.transcript.append({"role": "notice", "content": "the period ended without final_answer"})
        result.latency_s = time.monotonic() - self.started
        self.session._record(result, self.facts, final)
        return result


def run_file_agent(model: Agent, task: EpisodeTask, cfg: FileAgentSettings) -> EpisodeResult:
    """One period on its own: the mode's carry-over needs a chain (run_chain)."""
    return Session(model, cfg, sequential=False, skills=cfg.skills).play(task)


def run_chain(
    model: Agent, tasks: list[EpisodeTask], cfg: FileAgentSettings, after: After | None = None
) -> list[EpisodeOutcome]:
    """A scenario's periods in order with one Session; `after(i, outcome)` gives the feedback the
    agent reads before period i + 1. A period that fails (model error, jail) is an error row; the
    chain goes on with the next period."""
    session = Session(model, cfg, sequential=cfg.mode == "sequential", skills=cfg.skills)
    outcomes = []
    for i, task in enumerate(tasks):
        outcome = episode_outcome(model, lambda agent, task=task: session.play(task), cfg.final_answer_chars)
        outcomes.append(outcome)
        feedback = after(i, outcome) if after is not None else None
        session.end_period(feedback)
    return outcomes


class FileAgent(Harness[FileAgentSettings]):
    """`file-agent`: TimeSage-EV's code agent over a period's files; plays a scenario's periods as a chain."""

    kernel = True
    chains = True
    memory = False  # its tasks are files, not a series a precedent could be retrieved by

    def run(self, agent: Agent, task: EpisodeTask, cfg: FileAgentSettings) -> EpisodeResult:
        return run_file_agent(agent, task, cfg)

    def run_chain(
        self, agent: Agent, tasks: list[EpisodeTask], cfg: FileAgentSettings, after: After | None = None
    ) -> list[EpisodeOutcome]:
        return run_chain(agent, tasks, cfg, after)
