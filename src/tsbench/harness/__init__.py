"""Harnesses: each runs one episode (task in, final message + trace out) and knows nothing of runs."""

from __future__ import annotations

from typing import Callable

from tsbench.harness.episode import EpisodeError, EpisodeResult, EpisodeTask, HarnessConfig
from tsbench.models.base import ChatModel

HARNESSES = ("single-pass-text", "single-pass-image", "rlm", "rlm-image", "tools", "tools-image")

Harness = Callable[[ChatModel, EpisodeTask, HarnessConfig], EpisodeResult]


def get_harness(name: str) -> Harness:
    """The harness `name`; with `HarnessConfig.memory_bank` set, retrieved precedents prefix the prompt."""
    harness = _base_harness(name)

    def run(model: ChatModel, task: EpisodeTask, cfg: HarnessConfig) -> EpisodeResult:
        if not cfg.memory_bank or cfg.top_k <= 0:
            return harness(model, task, cfg)
        from tsbench.harness.tools import run_with_memory

        return run_with_memory(harness, model, task, cfg)

    return run


def _base_harness(name: str) -> Harness:
    if name == "single-pass-text" or name == "single-pass-image":
        from tsbench.harness.single_pass import run_single_pass

        image = name.endswith("image")
        return lambda model, task, cfg: run_single_pass(model, task, cfg, image=image)
    if name == "rlm" or name == "rlm-image":
        from tsbench.harness.rlm import run_rlm

        image = name.endswith("image")
        return lambda model, task, cfg: run_rlm(model, task, cfg, image=image)
    if name == "tools" or name == "tools-image":
        from tsbench.harness.tools import run_tools

        image = name.endswith("image")
        return lambda model, task, cfg: run_tools(model, task, cfg, image=image)
    raise ValueError(f"unknown harness {name!r}; choose from {', '.join(HARNESSES)}")


__all__ = ["HARNESSES", "EpisodeError", "EpisodeResult", "EpisodeTask", "HarnessConfig", "get_harness"]
