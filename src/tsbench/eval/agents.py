"""What plays an episode, from its spec string: a chat model (models/) or a reference policy
(baselines/), both `Agent`s that declare what they can do. Workers in any process rebuild agents
from the same strings, once each."""

from __future__ import annotations

import threading
from typing import Any

from tsbench.baselines import build_policy, canonical, is_reference
from tsbench.core.errors import UserError
from tsbench.harness import Harness
from tsbench.models.base import Agent, ModelUnavailableError, as_agent


def build_agent(spec: str, options: dict[str, Any] | None = None) -> Agent:
    """A ChatModel or a reference policy; a bad spec is a UserError (one line at the CLI)."""
    try:
        if is_reference(spec):
            return as_agent(build_policy(spec))
        from tsbench.models.registry import get_model

        return get_model(spec, **(options or {}))
    except (ValueError, ModelUnavailableError) as exc:
        raise UserError(str(exc)) from None


class Unbuilt(Agent):
    """A provider's model class standing in for its model before it is built: the class-level
    capabilities are the class's own; nothing else is known yet."""

    def __init__(self, cls: type, spec: str):
        self.cls, self.name = cls, spec

    def chats(self) -> bool:  # type: ignore[override]
        return self.cls.chats()

    def native_tools(self) -> bool:  # type: ignore[override]
        return self.cls.native_tools()

    def sees_images(self) -> bool:  # type: ignore[override]
        return self.cls.sees_images()

    def reads_series(self) -> bool:  # type: ignore[override]
        return self.cls.reads_series()

    def harnesses(self) -> tuple[str, ...] | None:
        return self.cls.plays


def check_before_building(spec: str, harness: Harness, settings: Any) -> None:
    """Refuse, from the spec alone (before a vLLM server starts or weights load), a model whose class
    cannot play `harness` with `settings`: every row would otherwise fail the same way, or be scored blind."""
    if is_reference(spec):
        return
    from tsbench.models.registry import model_class  # a reference policy's episodes never load providers

    try:
        cls = model_class(spec)
    except (ValueError, ModelUnavailableError):
        return  # build_agent says what is wrong with the spec
    if cls is not None and (problem := harness.pairing_problem(Unbuilt(cls, spec), settings)):
        raise UserError(problem)


def check_pairing(agent: Agent, harness: Harness, settings: Any) -> None:
    """Refuse, before any episode runs, an agent on a harness it cannot play, or with settings it
    cannot honour (native tool calls from a model without them); a harness whose extra is missing
    says so here, not per episode."""
    harness.prepare()
    if problem := harness.pairing_problem(agent, settings):
        raise UserError(problem)


class AgentCache:
    """One agent per (spec, options) per process, built on first use and shared by its threads."""

    def __init__(self) -> None:
        self._agents: dict[tuple, Agent] = {}
        self._lock = threading.Lock()

    def get(self, spec: str, options: dict[str, Any]) -> Agent:
        key = (canonical(spec), tuple(sorted((k, repr(v)) for k, v in options.items())))
        with self._lock:
            if key not in self._agents:
                self._agents[key] = build_agent(spec, options)
            return self._agents[key]

    def close(self) -> None:
        with self._lock:
            for agent in self._agents.values():
                agent.close()
            self._agents.clear()
