"""`--model provider/name` -> a ChatModel. A bare name (`gpt-4.1-mini`) means `openai/<name>`.

Providers are imported lazily, so a run of one kind never pays for (or needs) another's dependencies.
Options that a provider does not take are an error rather than silently dropped; None values are
ignored, so a CLI can pass all of its flags through unchanged. Reference policies (scripted/,
classical/, detector/) are built from their name alone and take no options.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from tsbench.models.base import ChatModel

OPENAI_OPTIONS = {"base_url", "api_key", "timeout_s", "retry", "extra_body"}
VLLM_OPTIONS = OPENAI_OPTIONS | {"port", "extra_args", "startup_timeout_s"}
LOCAL_OPTIONS = {"device", "dtype", "max_new_tokens", "seed"}

# Reference policies living elsewhere in the package: prefix -> (module, what a name there is called).
POLICY_MODULES = {
    "scripted": ("tsbench.models.scripted", "scripted policy"),
    "classical": ("tsbench.baselines.classical", "classical baseline"),
    "detector": ("tsbench.baselines.detector", "detector"),
}


def split_spec(spec: str) -> tuple[str, str]:
    """("provider", "name"); the name may itself hold slashes (an HF id or a path)."""
    spec = spec.strip()
    if not spec:
        raise ValueError("empty model name")
    if "/" not in spec:
        return "openai", spec
    provider, name = spec.split("/", 1)
    if not name:
        raise ValueError(f"model {spec!r} names a provider but no model")
    return provider, name


def _options_for(provider: str, allowed: set[str], opts: dict[str, Any]) -> dict[str, Any]:
    given = {key: value for key, value in opts.items() if value is not None}
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"option(s) {', '.join(unknown)} do not apply to {provider}/ models")
    return given


def _openai(name: str, opts: dict[str, Any]) -> ChatModel:
    from tsbench.models.openai_model import OpenAIChatModel

    return OpenAIChatModel(name, name=f"openai/{name}", **_options_for("openai", OPENAI_OPTIONS, opts))


def _vllm(name: str, opts: dict[str, Any]) -> ChatModel:
    from tsbench.models.vllm_server import VLLMChatModel

    return VLLMChatModel(name, **_options_for("vllm", VLLM_OPTIONS, opts))


def _local(name: str, opts: dict[str, Any]) -> ChatModel:
    from tsbench.models.local_hf import LocalHFModel

    return LocalHFModel(name, name=f"local/{name}", **_options_for("local", LOCAL_OPTIONS, opts))


def _policy(provider: str, name: str) -> ChatModel:
    module_name, what = POLICY_MODULES[provider]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or not module_name.startswith(error.name):
            raise  # the module exists but one of its own imports is missing: a real bug
        raise ValueError(f"unknown {what} {name!r}: {module_name} is not available") from None
    build = getattr(module, "build", None)
    if build is None:
        raise ValueError(f"unknown {what} {name!r}: {module_name} has no build()")
    try:
        return build(name)
    except LookupError:
        raise ValueError(f"unknown {what} {name!r}") from None


PROVIDERS: dict[str, Callable[[str, dict[str, Any]], ChatModel]] = {
    "openai": _openai,
    "vllm": _vllm,
    "local": _local,
}


def get_model(spec: str, **opts: Any) -> ChatModel:
    """Build the model `spec` names, e.g. "gpt-4.1-mini", "vllm/Qwen/Qwen2.5-7B-Instruct", "local/smollm2-135m"."""
    provider, name = split_spec(spec)
    if provider in PROVIDERS:
        return PROVIDERS[provider](name, opts)
    if provider in POLICY_MODULES:
        return _policy(provider, name)
    known = ", ".join(f"{p}/" for p in [*PROVIDERS, *POLICY_MODULES])
    raise ValueError(f"unknown model provider {provider!r} in {spec!r}; use one of {known} "
                     "or a bare OpenAI model name")
