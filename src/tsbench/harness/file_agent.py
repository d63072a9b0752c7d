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

`run_file_agent` plays one period (a harness in HARNESSES); `run_chain` plays a scenario's
periods in order, calling `after(i, outcome)` for the feedback text between periods.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tsbench.core.text import strip_reasoning
from tsbench.harness import file_agent_kernel as kernel
from tsbench.harness import file_agent_prompts as prompts
from tsbench.harness.accounting import spending
from tsbench.harness.episode import EpisodeError, EpisodeOutcome, EpisodeResult, EpisodeTask, HarnessConfig
from tsbench.harness.rlm import extract_code
from tsbench.harness.runtime.sandbox import Sandbox, SandboxError, truncate_observation
from tsbench.harness.skills import CHECK_LIMIT_S, Skill, SkillLibrary, decide, static_problems
from tsbench.models.base import Message

After = Callable[[int, EpisodeOutcome], "str | None"]


class Session:
    """One agent's state across the periods it plays (a single period in independent mode)."""

    def __init__(self, model: Any, cfg: HarnessConfig, *, sequential: bool, skills: bool):
        self.model = model
        self.cfg = cfg
        self.sequential = sequential
        self.skills_enabled = skills
        self.library = SkillLibrary()
        self.messages: list[Message] = []
        self.feedback: str | None = None
        self.compaction_requested = False
        self.last_input_tokens = 0

    # ---- one period

    def play(self, task: EpisodeTask) -> EpisodeResult:
        result = EpisodeResult()
        started = time.monotonic()
        deadline = started + self.cfg.period_wall_s  # cells are cut at it; an answer after it does not count
        facts: dict[str, Any] = {"compacted": 0, "induced": [], "rejected": {}, "invoked": [], "retrieved": []}
        self._open_period(task, result, facts)
        kernel = _Kernel(self, task)
        final: dict | None = None
        try:
            for step in range(1, self.cfg.period_steps + 1):
                if time.monotonic() - started >= self.cfg.period_wall_s:
                    result.transcript.append(
                        {
                            "role": "notice",
                            "content": f"period wall clock {self.cfg.period_wall_s:g} s reached without final_answer",
                        }
                    )
                    break
                self._check_tokens(result)
                if step == self.cfg.period_steps:
                    result.forced_final = True
                    self._append_to_last_user(prompts.LAST_STEP, result)
                final = self._step(task, kernel, step, result, facts, deadline)
                if final is not None:
                    if time.monotonic() > deadline:
                        result.transcript.append(
                            {
                                "role": "notice",
                                "content": "final_answer came after the period "
                                f"wall clock of {self.cfg.period_wall_s:g} s and does not count",
                            }
                        )
                        final = None
                    break
            if self.skills_enabled and facts.get("candidates"):
                self._check_skills(kernel.get(), task, facts, final, result)
        finally:
            kernel.close()
        if final is not None:
            result.final_message = json.dumps(
                {"answer": final.get("answer"), "report": final.get("report")}, ensure_ascii=False
            )
        else:
            result.transcript.append({"role": "notice", "content": "the period ended without final_answer"})
        result.latency_s = time.monotonic() - started
        self._record(result, facts, final)
        return result

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

    def _step(
        self, task: EpisodeTask, kernel: _Kernel, step: int, result: EpisodeResult, facts: dict, deadline: float
    ) -> dict | None:
        """One model reply and its code; the final_answer event if the reply made one."""
        info = replace(task.info(code_execution=True), meta={**task.meta, **self._meta("period")})
        with spending(result):  # a failing call's error row keeps the period's spend (harness/accounting.py)
            completion = self.model.generate(
                self.messages, max_tokens=self.cfg.max_tokens, temperature=self.cfg.temperature, task=info
            )
        result.add_completion(completion)
        self.last_input_tokens = completion.input_tokens
        self.messages.append(Message("assistant", completion.text))
        result.transcript.append(
            {
                "role": "assistant",
                "turn": step,
                "content": completion.text,
                "input_tokens": completion.input_tokens,
                "output_tokens": completion.output_tokens,
                "latency_s": round(completion.latency_s, 3),
            }
        )
        blocks = extract_code(completion.text)
        if not blocks:
            self._add_user(prompts.NO_CODE, result, role="tool", turn=step)
            return None
        sandbox = kernel.get()
        final, outputs, cells = None, [], []
        for code in blocks:
            cell = sandbox.run(code, timeout_s=deadline - time.monotonic())
            result.code_cells += 1
            outputs.append(cell.observation(max_chars=10 * self.cfg.observation_chars))
            cells.append(
                {
                    "code": code,
                    "timed_out": cell.timed_out,
                    "restarted": cell.restarted,
                    "seconds": round(cell.seconds, 3),
                }
            )
            if cell.restarted:  # a fresh kernel lost the tools (and maybe the files): set them up again
                self._prepare(sandbox, task)
            final = self._harvest(sandbox, facts)
            if final is not None:
                break
        observation = truncate_observation(
            "Output:\n" + ("\n".join(o for o in outputs if o) or "(no output)"), self.cfg.observation_chars
        )
        self.messages.append(Message("user", observation))
        result.transcript.append({"role": "tool", "turn": step, "cells": cells, "observation": observation})
        return final

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
        if self.messages and self.messages[-1].role == "user":
            self.messages[-1] = Message("user", self.messages[-1].content + "\n\n" + text)
        else:
            self.messages.append(Message("user", text))
        event = {"role": role, "content": text} if role == "user" else {"role": role, "turn": turn, "observation": text}
        result.transcript.append(event)

    def _append_to_last_user(self, text: str, result: EpisodeResult) -> None:
        last = self.messages[-1]
        self.messages[-1] = Message(last.role, f"{last.content}\n\n{text}", images=last.images)
        result.transcript.append({"role": "notice", "content": text})

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

    def _check_tokens(self, result: EpisodeResult) -> None:
        cap = self.cfg.episode_token_cap
        if cap is not None and result.input_tokens + result.output_tokens >= cap:
            raise EpisodeError(
                "token_cap", f"period used {result.input_tokens + result.output_tokens} tokens (cap {cap})", result
            )

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
            cfg = self.session.cfg
            self.sandbox = Sandbox(
                {},
                cell_timeout_s=cfg.cell_timeout_s,
                memory_bytes=int(cfg.memory_gib * 2**30),
                cell_output_bytes=int(cfg.cell_output_mib * 2**20),
                episode_output_bytes=int(cfg.episode_output_mib * 2**20),
                unsafe=cfg.unsafe_sandbox,
            )
            self.sandbox.start()
            self.session._prepare(self.sandbox, self.task)
        return self.sandbox

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None


def run_file_agent(model: Any, task: EpisodeTask, cfg: HarnessConfig) -> EpisodeResult:
    """One period on its own: the mode's carry-over needs a chain (run_chain)."""
    return Session(model, cfg, sequential=False, skills=cfg.skills).play(task)


def run_chain(
    model: Any, tasks: list[EpisodeTask], cfg: HarnessConfig, after: After | None = None, play: Callable | None = None
) -> list[EpisodeOutcome]:
    """A scenario's periods in order with one Session; `after(i, outcome)` gives the feedback the
    agent reads before period i + 1. A period that fails (model error, jail) is an error row; the
    chain goes on with the next period."""
    if play is None:
        from tsbench.harness import play
    session = Session(model, cfg, sequential=cfg.mode == "sequential", skills=cfg.skills)
    outcomes = []
    for i, task in enumerate(tasks):
        outcome = play(model, lambda m, t, c: session.play(t), task, cfg)
        outcomes.append(outcome)
        feedback = after(i, outcome) if after is not None else None
        session.end_period(feedback)
    return outcomes
