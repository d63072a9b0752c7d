"""Harnesses: each runs one episode (task in, final message + trace out) and knows nothing of runs."""

from __future__ import annotations

from typing import Callable

from tsbench.harness.episode import EpisodeError, EpisodeResult, EpisodeTask, HarnessConfig
from tsbench.models.base import ChatModel

HARNESSES = ("single-pass-text", "single-pass-image", "rlm", "rlm-image")

Harness = Callable[[ChatModel, EpisodeTask, HarnessConfig], EpisodeResult]


def get_harness(name: str) -> Harness:
    if name == "single-pass-text" or name == "single-pass-image":
        from tsbench.harness.single_pass import run_single_pass

        image = name.endswith("image")
        return lambda model, task, cfg: run_single_pass(model, task, cfg, image=image)
    if name == "rlm" or name == "rlm-image":
        from tsbench.harness.rlm import run_rlm

        image = name.endswith("image")
        return lambda model, task, cfg: run_rlm(model, task, cfg, image=image)
    raise ValueError(f"unknown harness {name!r}; choose from {', '.join(HARNESSES)}")


__all__ = ["HARNESSES", "EpisodeError", "EpisodeResult", "EpisodeTask", "HarnessConfig", "get_harness"]
