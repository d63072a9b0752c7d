"""The TimeClaw tools harness (`--harness tools` / `tools-image`): typed tools over a kernel-held series.

One episode = one fresh sandbox holding the series at full precision. The model never sees the
values in bulk: it calls typed tools (harness/toolset.py) through native function calling or the
JSON text protocol (harness/tool_protocol.py), and each call runs as one cell in the kernel and
comes back as a compact JSON observation. Budget and ending are the turn loop's (harness/loop.py):
at most `max_turns` model replies, the first reply without a tool call is the final message, and on
the last allowed reply tools are withdrawn and a notice demands the answer (flagged forced_final).
Every call is recorded in the transcript with its arguments, observation and timing; `code_cells`
counts the calls that ran.

`tools-image` adds `plot_window`, whose picture goes back to the model as an image part.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import ClassVar

from tsbench.core.episode import EpisodeResult, EpisodeTask, end_if_kernel_lost
from tsbench.core.extras import check
from tsbench.core.settings import setting
from tsbench.harness.base import Harness
from tsbench.harness.loop import TurnLoop
from tsbench.harness.runtime.observation import CellResult
from tsbench.harness.runtime.sandbox import Sandbox, SandboxError
from tsbench.harness.settings import HarnessSettings
from tsbench.harness.tool_protocol import ParsedCall, ToolProtocol, choose_protocol
from tsbench.harness.toolset import (
    Observation,
    Toolset,
    error_observation,
    read_observation,
    stumpy_cache_dir,
    warm_stumpy_cache_in_background,
)
from tsbench.models.base import Agent, Completion, Message


@dataclass
class ToolsSettings(HarnessSettings):
    """[tools]: TimeClaw's tool-calling harness's own settings."""

    SECTION: ClassVar[str] = "tools"

    tools_dir: str | None = setting(
        None, "Evolved tools: a folder of <name>/tool.json + tool.py (tsbench evolve --out).", aliases=("--tools",)
    )
    tool_protocol: str = setting(
        "auto",
        "Tool calls: native (OpenAI function calling), json (text protocol) or auto.",
        choices=("auto", "native", "json"),
    )
    max_tool_calls: int = setting(8, "Tool calls per model reply; calls beyond it get an error observation.", ge=1)


TOOLS_SYSTEM = """You analyse long time series with tools. The series is held in a workspace at full numerical \
precision and you never see it whole: you call typed tools that compute on it and return compact JSON observations.

The workspace holds {n_channels} channel(s) ({names}), each of L = {length} samples (indices 0 to {last}).

{protocol}

Ground every numerical claim in a tool observation. Calls in one reply run in order (at most {max_calls} per \
reply). You have at most {max_turns} replies. When you are done, reply WITHOUT any tool call: that reply is your \
final answer, in exactly the format the question asks for."""

TOOLS_FINAL_NOTICE = (
    "FINAL TURN: your turn budget is exhausted and tools are disabled. "
    "State your final answer NOW, in exactly the format the question asks for, without any tool call."
)


def tools_system_prompt(task: EpisodeTask, toolset: Toolset, protocol: ToolProtocol, cfg: ToolsSettings) -> str:
    names = task.channel_names
    shown = ", ".join(names[:16]) + (f", ... ({len(names)} in all)" if len(names) > 16 else "")
    return TOOLS_SYSTEM.format(
        n_channels=len(names),
        names=shown,
        length=task.length,
        last=task.length - 1,
        protocol=protocol.system_section(toolset),
        max_calls=cfg.max_tool_calls,
        max_turns=cfg.max_turns,
    )


def task_metadata(task: EpisodeTask) -> dict:
    """What the kernel's `TASK` holds: never the gold. `meta` is the family's facts (a CiK row's
    context and timestamps, a TSAIA row's weights); `timestamps` the samples' times in seconds when
    the family has them (meta "time_s"), else None."""
    return {
        "row_id": task.row_id,
        "category": task.category,
        "regime": task.regime,
        "length": task.length,
        "channels": list(task.channel_names),
        "options": list(task.options),
        "meta": dict(task.meta),
        "timestamps": task.meta.get("time_s"),
    }


def install_tools(sandbox: Sandbox, code: str) -> None:
    cell = sandbox.run(code)
    if cell.error or cell.timed_out:
        raise SandboxError(f"installing the tools in the kernel failed: {cell.error[-2000:]}")


def run_tool_call(
    sandbox: Sandbox, toolset: Toolset, call: ParsedCall, max_chars: int
) -> tuple[Observation, dict, CellResult | None]:
    """Validate and run one call in the kernel; every failure is an observation, never an exception
    (a lost kernel is the caller's to end the episode with: the cell comes back, None when none ran)."""
    if call.error:
        return error_observation(call.error), {}, None
    problem = toolset.validate(call.name, call.arguments)
    if problem:
        return error_observation(problem), {}, None
    cell = sandbox.run(toolset.call_code(call.name, call.arguments))
    observation = read_observation(cell, max_chars)
    timing = {"seconds": round(cell.seconds, 3), "timed_out": cell.timed_out, "restarted": cell.restarted}
    return observation, timing, cell


class ToolsEpisode(TurnLoop):
    """The tools turn loop: tool calls are the actions, their JSON observations the environment's response."""

    final_notice = TOOLS_FINAL_NOTICE

    def __init__(self, agent: Agent, task: EpisodeTask, cfg: ToolsSettings, *, image: bool, toolset: Toolset | None):
        super().__init__(agent, task, cfg)
        self.protocol = choose_protocol(agent, cfg.tool_protocol)
        self.dropped_calls = 0  # of the last reply, past max_tool_calls
        self.toolset = toolset or Toolset.build(image=image, tools_dir=cfg.tools_dir)
        if "discords" in self.toolset.names:
            warm_stumpy_cache_in_background()
        self.install_code = self.toolset.install_code(task_metadata(task), numba_cache=str(stumpy_cache_dir()))
        self.sandbox = Sandbox(
            task.series,
            capture_figures=False,
            readonly_paths=[path for path in (stumpy_cache_dir(),) if path.is_dir()],
            **cfg.kernel_limits(),
        )

    def environment(self):
        return self.sandbox

    def open(self) -> None:
        toolset = self.toolset
        system = tools_system_prompt(self.task, toolset, self.protocol, self.cfg)
        self.messages = [Message("system", system), Message("user", self.task.question)]
        self.result.transcript += [
            {"role": "system", "content": system},
            {"role": "user", "content": self.task.question},
            {
                "role": "tools",
                "protocol": self.protocol.name,
                "tools": toolset.names,
                "evolved": [n for n, s in toolset.specs.items() if s.family != "seed"],
            },
        ]
        install_tools(self.sandbox, self.install_code)

    def info(self):
        return replace(self.task.info(), tool_calling=self.protocol.name)

    def ask(self, turn: int, last: bool) -> Completion:
        cfg = self.cfg
        return self.protocol.generate(
            self.agent,
            self.messages,
            self.toolset,
            final=last,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
            task=self.info(),
        )

    def actions(self, completion: Completion, turn: int) -> list[ParsedCall]:
        """The calls that run: at most `max_tool_calls`. The rest never enter the conversation or the
        transcript (100,000 calls in one reply would be a 19 MB next request); one note says how many."""
        calls = self.protocol.calls(completion, self.toolset, turn)
        limit = self.cfg.max_tool_calls
        self.dropped_calls = max(0, len(calls) - limit) + int(completion.extra.get("tool_calls_dropped") or 0)
        completion.tool_calls = completion.tool_calls[:limit]
        return calls[:limit]

    def reply_event(self, completion: Completion, actions: list[ParsedCall]) -> dict:
        return {"tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in actions]}

    def remember(self, completion: Completion, actions: list[ParsedCall]) -> None:
        self.messages.append(self.protocol.assistant_message(completion))

    def respond(self, completion: Completion, actions: list[ParsedCall], turn: int) -> bool:
        cfg, result = self.cfg, self.result
        results, images = [], []
        for call in actions:
            left = self.remaining_s()
            if left is not None and left <= 0:
                break  # the episode's wall clock is spent: the check after this turn ends it
            observation, timing, cell = run_tool_call(self.sandbox, self.toolset, call, cfg.observation_chars)
            result.code_cells += bool(timing)  # calls refused before the kernel do not count
            results.append((call, observation))
            images.extend(observation.images)
            result.transcript.append(
                {
                    "role": "tool",
                    "turn": turn,
                    "id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "observation": observation.text,
                    "error": observation.error,
                    "images": [hashlib.sha256(png).hexdigest()[:16] for png in observation.images],
                    **timing,
                }
            )
            end_if_kernel_lost(cell, result)  # a lost kernel ends the row as an error (the call is kept above)
        self.messages.extend(self.protocol.result_messages(results, images[: cfg.max_figures]))
        if self.dropped_calls:
            dropped = int(result.attributes.get("tool_calls_dropped", 0)) + self.dropped_calls
            result.attributes["tool_calls_dropped"] = str(dropped)
            self.notify(f"[{self.dropped_calls} more tool call(s) not run: at most {cfg.max_tool_calls} per reply]")
        return False


class Tools(Harness[ToolsSettings]):
    """`tools`: typed tools over a kernel-held series (TimeClaw)."""

    kernel = True
    tools = True
    turn_rows = True

    def prepare(self) -> None:
        # The seed tools import these inside the kernel; without them every call would fail mid-episode.
        check("stumpy", "ruptures", "statsmodels", extra="timeclaw", what="the tools harness")

    def pairing_problem(self, agent: Agent, cfg: ToolsSettings) -> str | None:
        if cfg.tool_protocol == "native" and not agent.native_tools():
            return (
                f"{agent.name} has no native function calling: use --tool-protocol json (or auto) "
                f"with --harness {self.name}"
            )
        return super().pairing_problem(agent, cfg)

    def run(self, agent: Agent, task: EpisodeTask, cfg: ToolsSettings) -> EpisodeResult:
        self.prepare()
        return ToolsEpisode(agent, task, cfg, image=bool(self.images), toolset=None).run()


class ToolsImage(Tools):
    """`tools-image`: adds `plot_window`, whose picture goes back to the model as an image part."""

    images = "observations"
