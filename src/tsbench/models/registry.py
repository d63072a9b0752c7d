"""`--model provider/name` -> a ChatModel. A bare name (`gpt-4.1-mini`) means `openai/<name>`.

Providers are imported lazily, so a run of one kind never pays for (or needs) another's dependencies.
The registry owns option routing: each provider lists the options it takes, one it does not take
is an error rather than silently dropped, and None values are ignored, so a caller can pass all
of its settings through unchanged. Reference policies are not models: see tsbench.baselines.
A new provider is a `Provider` (or one function) and one line in PROVIDERS, or a `provider.<name>` plugin
entry point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tsbench.core.extras import check
from tsbench.core.registry import Registry
from tsbench.models.base import ChatModel, as_agent

OPENAI_OPTIONS = {
    "base_url",
    "api_key",
    "api_key_env",
    "price",
    "timeout_s",
    "retry",
    "extra_body",
    "max_attempts",
    "retry_delay_s",
    "context_tokens",
}
VLLM_OPTIONS = OPENAI_OPTIONS | {"port", "extra_args", "startup_timeout_s"}
LOCAL_OPTIONS = {"device", "dtype", "max_new_tokens", "seed", "threads"}
# Options every caller may pass whatever the provider; those a provider cannot use are dropped.
GENERIC_OPTIONS = {"base_url", "timeout_s", "max_attempts", "retry_delay_s"}


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


def options_for(provider: str, allowed: set[str], opts: dict[str, Any], ints: tuple[str, ...] = ()) -> dict[str, Any]:
    """The options `provider` takes from `opts` (those in `ints` as ints); one it does not take is an error."""
    given = {
        key: value
        for key, value in opts.items()
        if value is not None and (key in allowed or key not in GENERIC_OPTIONS)
    }
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(f"option(s) {', '.join(unknown)} do not apply to {provider}/ models")
    return {key: int(value) if key in ints else value for key, value in given.items()}


def _with_retry(opts: dict[str, Any]) -> dict[str, Any]:
    """Plain-number retry settings (they travel in jobs to other processes) -> a RetryPolicy."""
    attempts, delay = opts.pop("max_attempts", None), opts.pop("retry_delay_s", None)
    if attempts is None and delay is None:
        return opts
    from tsbench.models.retry import RetryPolicy

    base = RetryPolicy()
    delay = base.base_delay_s if delay is None else float(delay)
    scale = delay / base.base_delay_s
    opts["retry"] = RetryPolicy(
        max_attempts=base.max_attempts if attempts is None else int(attempts),
        base_delay_s=delay,
        max_delay_s=base.max_delay_s * scale,
        max_total_s=base.max_total_s * max(scale, 0.01),
        rate_limit_base_delay_s=base.rate_limit_base_delay_s * scale,
    )
    return opts


class Provider:
    """A model provider: `build(name, options)` makes the model; `model_class(name)` names the class
    it will be before it is built, so a pairing its class-level capabilities (models/base.py `Agent`)
    rule out is refused before a server starts or weights load. A plain `(name, options) -> model`
    function (a plugin's) is a provider whose class is known only once built."""

    def build(self, name: str, opts: dict[str, Any]) -> ChatModel:
        raise NotImplementedError

    def model_class(self, name: str) -> type | None:
        return None


class FunctionProvider(Provider):
    def __init__(self, build: Callable[[str, dict[str, Any]], ChatModel]):
        self.build = build  # type: ignore[method-assign]


class OpenAIProvider(Provider):
    def build(self, name: str, opts: dict[str, Any]) -> ChatModel:
        from tsbench.models.openai_model import OpenAIChatModel

        return OpenAIChatModel(name, name=f"openai/{name}", **_with_retry(options_for("openai", OPENAI_OPTIONS, opts)))

    def model_class(self, name: str) -> type:
        from tsbench.models.openai_model import OpenAIChatModel

        return OpenAIChatModel


class VLLMProvider(Provider):
    def build(self, name: str, opts: dict[str, Any]) -> ChatModel:
        from tsbench.models.vllm_server import VLLMChatModel

        return VLLMChatModel(name, **_with_retry(options_for("vllm", VLLM_OPTIONS, opts)))

    def model_class(self, name: str) -> type:
        from tsbench.models.vllm_server import VLLMChatModel

        return VLLMChatModel


class LocalProvider(Provider):
    def build(self, name: str, opts: dict[str, Any]) -> ChatModel:
        return self.model_class(name)(name, name=f"local/{name}", **options_for("local", LOCAL_OPTIONS, opts))

    def model_class(self, name: str) -> type:
        check("torch", "transformers", "safetensors", extra="local", what="a local/ model")
        from tsbench.models.local_hf import LocalHFModel
        from tsbench.models.local_vlm import LocalVLMModel, names_vision_language

        return LocalVLMModel if names_vision_language(name) else LocalHFModel  # images reach a VLM as pixels


# name -> a Provider (or a (model name, options) -> ChatModel function); plugins' providers (`provider.<name>`
# entry points in the `tsbench.plugins` group, see tsbench.core.registry) follow the built-ins.
PROVIDERS = Registry(
    "provider",
    {
        "openai": OpenAIProvider,
        "vllm": VLLMProvider,
        "local": LocalProvider,
        "tslm": "tsbench.models.tslm.provider:build_model",  # trained TSLM run dirs (sft-baseline --model tslm/<arch>)
        "toto": "tsbench.models.tslm.toto:build_model",  # Toto-1.0-QA checkpoints and their SFT runs (series + plot)
    },
)


def provider(spec: str) -> tuple[Provider, str]:
    """The provider of `spec` and the model name it is given."""
    name, model = split_spec(spec)
    if name not in PROVIDERS:
        known = ", ".join(f"{p}/" for p in PROVIDERS)
        raise ValueError(
            f"unknown model provider {name!r} in {spec!r}; use one of {known} or a bare OpenAI model name, "
            "or a reference policy: scripted/, classical/, detector/"
        )
    found = PROVIDERS.load(name)
    if isinstance(found, type) and issubclass(found, Provider):
        return found(), model
    return FunctionProvider(found), model


def get_model(spec: str, **opts: Any) -> ChatModel:
    """Build the model `spec` names, e.g. "gpt-4.1-mini", "vllm/Qwen/Qwen2.5-7B-Instruct", "local/smollm2-135m"."""
    found, name = provider(spec)
    return as_agent(found.build(name, opts))


def model_class(spec: str) -> type | None:
    """The class `spec`'s provider will build, without building it (None: known only once built)."""
    found, name = provider(spec)
    return found.model_class(name)
