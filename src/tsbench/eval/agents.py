"""What plays an episode, from its spec string: a chat model (models/) or a reference policy
(baselines/). Workers in any process rebuild agents from the same strings, once each."""

from __future__ import annotations

import threading
from typing import Any

from tsbench.baselines import build_policy, is_reference
from tsbench.core.errors import UserError
from tsbench.harness import HARNESSES, REFERENCE_HARNESSES, HarnessConfig, get_harness
from tsbench.models.base import ModelUnavailableError
from tsbench.models.registry import get_model, split_spec


def build_agent(spec: str, options: dict[str, Any] | None = None) -> Any:
    """A ChatModel or a reference policy; a bad spec is a UserError (one line at the CLI)."""
    try:
        if is_reference(spec):
            return build_policy(spec)
        return get_model(spec, **(options or {}))
    except (ValueError, ModelUnavailableError) as exc:
        raise UserError(str(exc)) from None


def default_harness(spec: str) -> str:
    """rlm for models; the first harness a reference policy declares (direct for the detector)."""
    if is_reference(spec):
        return "direct" if spec.split("/", 1)[0] in ("detector", "classical") else "rlm"
    return "rlm"


TOOL_HARNESSES = ("tools", "tools-image")
IMAGE_HARNESSES = ("single-pass-image", "rlm-image", "tools-image")
NO_NATIVE_TOOLS = ("vllm", "local")  # providers without native function calling (no `native_tools`)
TEXT_ONLY = ("local",)  # providers whose models drop image parts (but a local vision-language model)


def check_combination(spec: str, harness: str, hc: HarnessConfig | None = None) -> None:
    """Refuse, from the spec alone (before a vLLM server starts or weights load), settings that cannot
    work together: every row would otherwise fail the same way, or be scored blind."""
    if is_reference(spec) or "/" not in spec.strip():
        return
    try:
        provider = split_spec(spec)[0]
    except ValueError:
        return  # build_agent says what is wrong with the spec
    if provider in NO_NATIVE_TOOLS and harness in TOOL_HARNESSES and hc is not None and hc.tool_protocol == "native":
        raise UserError(
            f"{provider}/ models have no native function calling: use --tool-protocol json (or auto) "
            f"with --harness {harness}"
        )
    if provider in TEXT_ONLY and harness in IMAGE_HARNESSES and not local_vision_language(spec):
        raise UserError(
            f"{provider}/ models read text only, and --harness {harness} shows the series as an image: "
            "use a text harness (single-pass-text, rlm, tools)"
        )


def local_vision_language(spec: str) -> bool:
    """A local/ directory holding an image-text-to-text model (Qwen2.5-VL, ...) sees images (models/local_vlm.py)."""
    from tsbench.models.local_vlm import names_vision_language

    return split_spec(spec)[0] == "local" and names_vision_language(split_spec(spec)[1])


def check_pairing(spec: str, harness: str, agent: Any | None = None, hc: HarnessConfig | None = None) -> None:
    """Refuse, before any episode runs, an agent on a harness it cannot play, or with settings it
    cannot honour (native tool calls from a model without them)."""
    if harness not in HARNESSES:
        raise UserError(f"--harness must be one of {', '.join(HARNESSES)} (got {harness})")
    get_harness(harness)  # imports it: a harness whose extra is missing says so here, not per episode
    supported = getattr(agent, "harnesses", None)
    if supported is not None and harness not in supported:
        raise UserError(f"{spec} plays {', '.join(supported)}, not {harness}")
    if harness == "series" and supported is None:
        raise UserError(f"--harness series is for models that read the series natively (tslm/); {spec} reads messages")
    if harness in REFERENCE_HARNESSES and not is_reference(spec):
        raise UserError(f"--harness {harness} is for reference policies (detector/, classical/); {spec} is a model")
    check_combination(spec, harness, hc)
    if (
        agent is not None
        and hc is not None
        and harness in TOOL_HARNESSES
        and hc.tool_protocol == "native"
        and not getattr(agent, "native_tools", False)
    ):
        raise UserError(
            f"{spec} has no native function calling: use --tool-protocol json (or auto) with --harness {harness}"
        )


def reference_note(agent: Any) -> str | None:
    """What a reference policy knows that a model does not (None for models)."""
    return getattr(agent, "reference", None)


class AgentCache:
    """One agent per (spec, options) per process, built on first use and shared by its threads."""

    def __init__(self) -> None:
        self._agents: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    def get(self, spec: str, options: dict[str, Any]) -> Any:
        key = (spec, tuple(sorted((k, repr(v)) for k, v in options.items())))
        with self._lock:
            if key not in self._agents:
                self._agents[key] = build_agent(spec, options)
            return self._agents[key]

    def close(self) -> None:
        with self._lock:
            for agent in self._agents.values():
                agent.close()
            self._agents.clear()
