"""API keys a config file names go to a host other than their provider's own only when the command line
says so too.

A config file is a shared file (experiments/..., a colleague's TOML): one that sets `base_url` to its own
server and `api_key_env = "OPENAI_API_KEY"` had that key sent there without a word. So a key variable that
only a --config file names (`api_key_env`, `judge_api_key_env`, or `api_key_env` among its `model_args`) goes
to its provider's own endpoint (OpenAI's API; the vLLM server tsbench starts itself), and anywhere else
only when the command line names the same variable (--api-key-env, --judge-api-key-env, -M or -T) or
--trust-config-keys is given. Otherwise eval stops before any request, with one line naming the key and the
host (exit 2).

The same holds for a Ray cluster a config file names (`ray_address`): the driver's keys go to its
workers' environment (executors/ray.py), so a cluster only the file names, not on this machine, gets
them only when the command line names it too (--ray-address) or --trust-config-keys is given.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from tsbench.eval.model_args import parse_model_args
from tsbench.models.endpoint import is_openai_endpoint, resolve_base_url
from tsbench.models.registry import split_spec

__all__ = ["TRUST_FLAG", "config_key_refusals"]

TRUST_FLAG = "--trust-config-keys"


def _forwarded_keys() -> tuple[str, ...]:
    """The secrets among what Ray workers are sent (executors/ray.py, imported only for a Ray run)."""
    from tsbench.eval.executors.ray import FORWARDED_ENV

    return tuple(name for name in FORWARDED_ENV if name.endswith("_KEY"))


def _normalised(settings: dict[str, Any]) -> dict[str, Any]:
    return {str(key).replace("-", "_"): value for key, value in settings.items()}


def _model_args(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    items = value if isinstance(value, list) else [value]
    return parse_model_args([str(item) for item in items])


def _destination(spec: str | None, base_url: str | None) -> str | None:
    """Where a model of `spec` sends its key: None for its provider's own endpoint, else the URL."""
    if not spec:
        return None
    try:
        provider, _ = split_spec(spec)
    except ValueError:
        return None
    if provider == "openai":
        url = resolve_base_url(base_url)
        return None if is_openai_endpoint(url) else url
    if provider == "vllm":
        return base_url or os.environ.get("VLLM_BASE_URL") or None
    return base_url or None


def _host(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc or url


def _local_cluster(address: str) -> bool:
    """`auto` (the cluster `ray start` made on this machine) or a loopback address."""
    if address in ("auto", "local"):
        return True
    host = urlsplit(address if "://" in address else f"ray://{address}").hostname or ""
    return host == "localhost" or host.startswith("127.") or host == "::1"


def _ray_refusal(cfg, file: dict[str, Any], command_line: dict[str, Any]) -> str | None:
    address = getattr(cfg, "ray_address", None)
    if (
        getattr(cfg, "executor", None) != "ray"
        or not address
        or "ray_address" in command_line
        or file.get("ray_address") != address
    ):
        return None
    if _local_cluster(str(address)):
        return None
    keys = [name for name in dict.fromkeys((*_forwarded_keys(), cfg.api_key_env, cfg.judge_api_key_env)) if name]
    keys = [name for name in keys if os.environ.get(name)]
    if not keys:
        return None
    return (
        f"the config file names the Ray cluster {address}, whose workers would be sent {', '.join(keys)}: "
        f"say so on the command line (--ray-address {address}) or pass {TRUST_FLAG} to send them there"
    )


def config_key_refusals(cfg, from_file: dict[str, Any], from_command_line: dict[str, Any]) -> list[str]:
    """One line for each key variable that only the config file names and that would go to a host other
    than its provider's own (empty: nothing to refuse). `cfg` is the built EvalConfig."""
    file, command_line = _normalised(from_file), _normalised(from_command_line)
    model_args = _model_args(cfg.model_args)
    file_args = {} if "model_args" in command_line else _model_args(file.get("model_args"))
    model_url = model_args.get("base_url") or cfg.base_url
    named = []  # (setting as the file spells it, variable, flag that confirms it, spec, url)
    model_key = model_args.get("api_key_env")
    if model_key and file_args.get("api_key_env") == model_key:
        named.append(("model_args api_key_env", str(model_key), "-M api_key_env=", cfg.model, model_url))
    elif cfg.api_key_env and "api_key_env" not in command_line and file.get("api_key_env") == cfg.api_key_env:
        named.append(("api_key_env", cfg.api_key_env, "--api-key-env ", cfg.model, model_url))
    judge_key = cfg.judge_api_key_env
    if judge_key and "judge_api_key_env" not in command_line and file.get("judge_api_key_env") == judge_key:
        named.append(("judge_api_key_env", judge_key, "--judge-api-key-env ", cfg.judge, cfg.judge_base_url))
    refusals = [note] if (note := _ray_refusal(cfg, file, command_line)) else []
    for setting, variable, flag, spec, url in named:
        destination = _destination(spec, url)
        if destination is None:
            continue
        refusals.append(
            f"the config file names {variable} ({setting}) as the key to send to {_host(destination)}, "
            f"not its provider's own endpoint: say so on the command line ({flag}{variable}) or pass "
            f"{TRUST_FLAG} to send it there"
        )
    return refusals
