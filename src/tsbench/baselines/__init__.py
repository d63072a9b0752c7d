"""Reference policies: what a model is compared against, never ranked as one.

- `scripted/*`: deterministic chat policies that play the chat harnesses (rlm writes real code,
  single-pass-text reads its prompt, tools makes real tool calls) and see only what a model sees.
- `detector/<name>` and `classical/<dir>`: signal-processing and feature+XGBoost policies that
  read the full-resolution series under the `direct` harness; their `reference()` note ("knows the
  generator") is shown beside every number.

Each is an `Agent` (models/base.py) declaring what it can do. They are named one way, `kind/name`,
in POLICIES, the shared registry (plugins add `policy.<kind>/<name>` entry points): a name with a
slash is one policy (its class, built without arguments); a bare kind (`detector`) is a family of
policies built from the rest of the spec (`detector/default`, `classical/models/classical`).
"""

from __future__ import annotations

from tsbench.core.registry import Registry

POLICIES = Registry(
    "policy",
    {
        "scripted/zscore": "tsbench.baselines.scripted:ZScorePolicy",
        "scripted/trivial-code": "tsbench.baselines.scripted:TrivialCodePolicy",
        "scripted/tools": "tsbench.baselines.scripted:ToolsPolicy",
        "scripted/tools-json": "tsbench.baselines.scripted:JsonToolsPolicy",
        "scripted/timesage": "tsbench.baselines.scripted_timesage:TimeSagePolicy",
        "scripted/cik-persistence": "tsbench.baselines.scripted_cik:PersistencePolicy",
        "scripted/timerbed-first": "tsbench.baselines.scripted_timerbed:FirstClassPolicy",
        "detector": "tsbench.baselines.detector:build",  # detector/<settings name>
        "classical": "tsbench.baselines.classical_policy:build",  # classical/<fitted model dir>
    },
)
# Earlier spellings, still read from configs and command lines.
ALIASES = {"scripted-cik/persistence": "scripted/cik-persistence", "scripted-timerbed/first": "scripted/timerbed-first"}


def canonical(spec: str) -> str:
    """The one name of a reference policy (an old spelling mapped to it); any other spec unchanged."""
    return ALIASES.get(spec.strip(), spec.strip())


def is_reference(spec: str) -> bool:
    """Whether `spec` names a reference policy (a kind in POLICIES), not a model."""
    kinds = {name.split("/", 1)[0] for name in POLICIES}
    return canonical(spec).split("/", 1)[0] in kinds


def build_policy(spec: str):
    """The reference policy `spec` names; a UserError listing the choices when there is none."""
    spec = canonical(spec)
    if spec in POLICIES:
        return POLICIES.load(spec)()
    kind, _, rest = spec.partition("/")
    if kind in POLICIES and rest:
        try:
            return POLICIES.load(kind)(rest)
        except LookupError:
            raise ValueError(f"unknown {kind} policy {rest!r} in {spec!r}") from None
    return POLICIES.load(spec)  # the registry's own error: unknown reference policy, with the choices
