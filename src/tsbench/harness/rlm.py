"""The recursive-LM harness: the model writes Python into a persistent kernel that holds the series.

One episode = one fresh sandbox. Each reply's fenced code blocks run in order and their output comes
back as the next message; the first reply without code is the final message. On the last allowed
reply code is withdrawn and a notice demands the answer (the episode is flagged forced_final).
With depth N > 0 the kernel gets `sub_rlm(...)`, which runs a nested episode at depth N - 1.
"""

from __future__ import annotations

import hashlib
import re
import time

import numpy as np

from tsbench.core.text import strip_reasoning
from tsbench.harness.accounting import CUT_OFF_NOTICE, nested, spending, unfinished
from tsbench.harness.episode import EpisodeError, EpisodeResult, EpisodeTask, HarnessConfig
from tsbench.harness.prompts import FINAL_TURN_NOTICE, observation_message, rlm_system_prompt
from tsbench.harness.runtime.sandbox import Sandbox, truncate_observation
from tsbench.models.base import ChatModel, Message

CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py|ipython)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(reply: str) -> list[str]:
    """Fenced code blocks outside reasoning, in order; empty blocks are dropped."""
    return [block for block in CODE_BLOCK.findall(strip_reasoning(reply)) if block.strip()]


def _sub_task(parent: EpisodeTask, question: str, data: dict | None) -> EpisodeTask:
    if data is None:
        names, values = parent.channel_names, parent.values
    else:
        names = [str(k) for k in data]
        arrays = [np.asarray(v, dtype=np.float32).ravel() for v in data.values()]
        if not arrays or len({len(a) for a in arrays}) != 1 or len(arrays[0]) == 0:
            raise ValueError("sub_rlm data must be a non-empty dict of equal-length 1-D arrays")
        values = np.stack(arrays)
    return EpisodeTask(
        row_id=f"{parent.row_id}/sub",
        category=parent.category,
        regime=parent.regime,
        question=question,
        channel_names=list(names),
        values=values,
    )


def run_rlm(
    model: ChatModel, task: EpisodeTask, cfg: HarnessConfig, *, image: bool, depth: int | None = None
) -> EpisodeResult:
    depth = cfg.depth if depth is None else depth
    result = EpisodeResult()
    started = time.monotonic()

    handler = None
    if depth > 0:

        def handler(question: str, data: dict | None) -> str:
            sub = nested(
                result, lambda: run_rlm(model, _sub_task(task, question, data), cfg, image=image, depth=depth - 1)
            )  # its cost and calls join this row's
            result.sub_calls += 1 + sub.sub_calls
            result.sub_call_tokens += sub.input_tokens + sub.output_tokens + sub.sub_call_tokens
            result.transcript.append(
                {"role": "sub_rlm", "question": question, "final": sub.final_message, "turns": sub.turns}
            )
            return sub.final_message

    system = rlm_system_prompt(image=image, depth=depth, max_turns=cfg.max_turns, obs_chars=cfg.observation_chars)
    messages = [Message("system", system), Message("user", task.question)]
    result.transcript += [{"role": "system", "content": system}, {"role": "user", "content": task.question}]
    sandbox = Sandbox(
        task.series,
        cell_timeout_s=cfg.cell_timeout_s,
        memory_bytes=int(cfg.memory_gib * 2**30),
        cell_output_bytes=int(cfg.cell_output_mib * 2**20),
        episode_output_bytes=int(cfg.episode_output_mib * 2**20),
        capture_figures=image,
        max_figures=cfg.max_figures,
        sub_rlm_handler=handler,
        unsafe=cfg.unsafe_sandbox,
        files=task.files,
    )
    with sandbox:
        for turn in range(1, cfg.max_turns + 1):
            last = turn == cfg.max_turns
            if last:
                result.forced_final = True
                messages[-1] = Message(
                    "user", f"{messages[-1].content}\n\n{FINAL_TURN_NOTICE}", images=messages[-1].images
                )
                result.transcript.append({"role": "notice", "content": FINAL_TURN_NOTICE})
            _check_caps(result, cfg, started)
            with spending(result):
                completion = model.generate(
                    messages,
                    max_tokens=cfg.max_tokens,
                    temperature=cfg.temperature,
                    task=task.info(code_execution=True),
                )
            result.add_completion(completion)
            messages.append(Message("assistant", completion.text))
            result.transcript.append(
                {
                    "role": "assistant",
                    "turn": turn,
                    "content": completion.text,
                    "input_tokens": completion.input_tokens,
                    "output_tokens": completion.output_tokens,
                    "latency_s": round(completion.latency_s, 3),
                    "finish_reason": completion.extra.get("finish_reason"),
                }
            )
            blocks = [] if last else extract_code(completion.text)
            if not blocks:
                if unfinished(completion, cfg):  # never a final answer (harness/accounting.py)
                    if not last:
                        messages.append(Message("user", CUT_OFF_NOTICE))
                        result.transcript.append({"role": "notice", "content": CUT_OFF_NOTICE})
                    continue
                result.final_message = completion.text
                break
            outputs, images, events = [], [], []
            skipped, blocks = max(0, len(blocks) - cfg.max_blocks_per_reply), blocks[: cfg.max_blocks_per_reply]
            for code in blocks:
                remaining = _remaining_s(cfg, started)
                if remaining is not None and remaining <= 0:
                    break  # the episode's wall clock is spent: the check below ends it
                cell = sandbox.run(code, timeout_s=remaining)
                result.code_cells += 1
                outputs.append(cell.observation(max_chars=10 * cfg.observation_chars))
                images.extend(cell.images)
                events.append(
                    {
                        "code": code,
                        "timed_out": cell.timed_out,
                        "restarted": cell.restarted,
                        "seconds": round(cell.seconds, 3),
                    }
                )
            if skipped:
                outputs.append(f"[{skipped} more code block(s) not run: at most {cfg.max_blocks_per_reply} per reply]")
            images = images[: cfg.max_figures] if image else []
            observation = truncate_observation(observation_message(outputs, len(images)), cfg.observation_chars)
            messages.append(Message("user", observation, images=images))
            result.transcript.append(
                {
                    "role": "tool",
                    "turn": turn,
                    "cells": events,
                    "observation": observation,
                    "images": [hashlib.sha256(png).hexdigest()[:16] for png in images],
                }
            )
            _check_caps(result, cfg, started)  # a spent wall clock ends the episode here, not after another reply
    return result


def _check_caps(result: EpisodeResult, cfg: HarnessConfig, started: float) -> None:
    if cfg.episode_token_cap is not None and result.input_tokens + result.output_tokens >= cfg.episode_token_cap:
        raise EpisodeError(
            "token_cap",
            f"episode used {result.input_tokens + result.output_tokens} tokens (cap {cfg.episode_token_cap})",
            result,
        )
    if cfg.episode_wall_s is not None and time.monotonic() - started >= cfg.episode_wall_s:
        raise EpisodeError("wall_clock", f"episode ran past {cfg.episode_wall_s} s", result)


def _remaining_s(cfg: HarnessConfig, started: float) -> float | None:
    """Seconds left of the episode's wall clock (None: no cap); each cell's timeout is at most this."""
    return None if cfg.episode_wall_s is None else cfg.episode_wall_s - (time.monotonic() - started)
