"""The TimeClaw tools harness (`--harness tools` / `tools-image`): typed tools over a kernel-held series.

One episode = one fresh sandbox holding the series at full precision. The model never sees the
values in bulk: it calls typed tools (harness/toolset.py) through native function calling or the
JSON text protocol (harness/tool_protocol.py), and each call runs as one cell in the kernel and
comes back as a compact JSON observation. Budget and ending are the rlm harness's: at most
`max_turns` model replies, the first reply without a tool call is the final message, and on the
last allowed reply tools are withdrawn and a notice demands the answer (flagged forced_final).
Every call is recorded in the transcript with its arguments, observation and timing; `code_cells`
counts the calls that ran.

`tools-image` adds `plot_window`, whose picture goes back to the model as an image part.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace

from tsbench.core.extras import check
from tsbench.harness.accounting import CUT_OFF_NOTICE, spending, unfinished
from tsbench.harness.episode import EpisodeResult, EpisodeTask, HarnessConfig
from tsbench.harness.rlm import _check_caps
from tsbench.harness.runtime.sandbox import Sandbox, SandboxError
from tsbench.harness.tool_protocol import ParsedCall, ToolProtocol, choose_protocol
from tsbench.harness.toolset import (
    Observation,
    Toolset,
    error_observation,
    read_observation,
    stumpy_cache_dir,
    warm_stumpy_cache_in_background,
)
from tsbench.models.base import ChatModel, Message

# The seed tools import these inside the kernel; without them every call would fail mid-episode.
check("stumpy", "ruptures", "statsmodels", extra="timeclaw", what="the tools harness")

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


def tools_system_prompt(task: EpisodeTask, toolset: Toolset, protocol: ToolProtocol, cfg: HarnessConfig) -> str:
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
    sandbox: Sandbox, toolset: Toolset, call: ParsedCall, install_code: str, max_chars: int
) -> tuple[Observation, dict]:
    """Validate and run one call in the kernel; every failure is an observation, never an exception."""
    if call.error:
        return error_observation(call.error), {}
    problem = toolset.validate(call.name, call.arguments)
    if problem:
        return error_observation(problem), {}
    cell = sandbox.run(toolset.call_code(call.name, call.arguments))
    if cell.restarted:  # a fresh kernel has the series but not the tools
        install_tools(sandbox, install_code)
    observation = read_observation(cell, max_chars)
    return observation, {"seconds": round(cell.seconds, 3), "timed_out": cell.timed_out, "restarted": cell.restarted}


def run_tools(
    model: ChatModel, task: EpisodeTask, cfg: HarnessConfig, *, image: bool = False, toolset: Toolset | None = None
) -> EpisodeResult:
    protocol = choose_protocol(model, cfg.tool_protocol)
    toolset = toolset or Toolset.build(image=image, tools_dir=cfg.tools_dir)
    if "discords" in toolset.names:
        warm_stumpy_cache_in_background()
    result = EpisodeResult()
    started = time.monotonic()
    system = tools_system_prompt(task, toolset, protocol, cfg)
    messages = [Message("system", system), Message("user", task.question)]
    result.transcript += [
        {"role": "system", "content": system},
        {"role": "user", "content": task.question},
        {
            "role": "tools",
            "protocol": protocol.name,
            "tools": toolset.names,
            "evolved": [n for n, s in toolset.specs.items() if s.family != "seed"],
        },
    ]
    info = replace(task.info(), tool_calling=protocol.name)
    install_code = toolset.install_code(task_metadata(task), numba_cache=str(stumpy_cache_dir()))
    sandbox = Sandbox(
        task.series,
        cell_timeout_s=cfg.cell_timeout_s,
        memory_bytes=int(cfg.memory_gib * 2**30),
        cell_output_bytes=int(cfg.cell_output_mib * 2**20),
        episode_output_bytes=int(cfg.episode_output_mib * 2**20),
        capture_figures=False,
        unsafe=cfg.unsafe_sandbox,
        readonly_paths=[path for path in (stumpy_cache_dir(),) if path.is_dir()],
    )
    with sandbox:
        install_tools(sandbox, install_code)
        for turn in range(1, cfg.max_turns + 1):
            last = turn == cfg.max_turns
            if last:
                result.forced_final = True
                protocol.add_notice(messages, TOOLS_FINAL_NOTICE)
                result.transcript.append({"role": "notice", "content": TOOLS_FINAL_NOTICE})
            _check_caps(result, cfg, started)
            with spending(result):
                completion = protocol.generate(
                    model,
                    messages,
                    toolset,
                    final=last,
                    max_tokens=cfg.max_tokens,
                    temperature=cfg.temperature,
                    task=info,
                )
            result.add_completion(completion)
            calls = [] if last else protocol.calls(completion, toolset, turn)
            result.transcript.append(
                {
                    "role": "assistant",
                    "turn": turn,
                    "content": completion.text,
                    "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
                    "input_tokens": completion.input_tokens,
                    "output_tokens": completion.output_tokens,
                    "latency_s": round(completion.latency_s, 3),
                    "finish_reason": completion.extra.get("finish_reason"),
                }
            )
            if not calls:
                if unfinished(completion, cfg):  # never a final answer (harness/accounting.py)
                    if not last:
                        messages.append(Message("assistant", completion.text))
                        protocol.add_notice(messages, CUT_OFF_NOTICE)
                        result.transcript.append({"role": "notice", "content": CUT_OFF_NOTICE})
                    continue
                result.final_message = completion.text
                break
            messages.append(protocol.assistant_message(completion))
            results, images = [], []
            for index, call in enumerate(calls):
                if index >= cfg.max_tool_calls:
                    observation, timing = (
                        error_observation(f"not run: at most {cfg.max_tool_calls} tool calls per reply"),
                        {},
                    )
                else:
                    observation, timing = run_tool_call(sandbox, toolset, call, install_code, cfg.observation_chars)
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
            messages.extend(protocol.result_messages(results, images[: cfg.max_figures]))
    return result
