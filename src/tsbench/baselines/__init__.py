"""Reference policies: what a model is compared against, never ranked as one.

- `scripted/*`: deterministic chat policies that play the chat harnesses (rlm writes real code,
  single-pass-text reads its prompt, tools makes real tool calls) and see only what a model sees.
- `detector/default` and `classical/<dir>`: signal-processing and feature+XGBoost policies that
  read the full-resolution series under the `direct` harness; they carry a `reference` note
  ("knows the generator") that every table shows.

A policy class declares the harnesses it can play (`harnesses`). A new policy family is one line
in POLICIES.
"""

from __future__ import annotations

import importlib

POLICIES = {
    "scripted": "tsbench.baselines.scripted",
    "detector": "tsbench.baselines.detector",
    "classical": "tsbench.baselines.classical",
    "scripted-cik": "tsbench.baselines.scripted_cik",
    "scripted-timerbed": "tsbench.baselines.scripted_timerbed",
}


def is_reference(spec: str) -> bool:
    return spec.split("/", 1)[0] in POLICIES


def build_policy(spec: str):
    """The reference policy `spec` names (provider/name); ValueError when it does not exist."""
    provider, _, name = spec.partition("/")
    module = importlib.import_module(POLICIES[provider])
    try:
        return module.build(name)
    except LookupError:
        raise ValueError(f"unknown {provider} policy {name!r} in {spec!r}") from None
