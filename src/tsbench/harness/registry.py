"""Harnesses by name: the built-ins below, then plugins' (`harness.<name>` entry points in the
`tsbench.plugins` group, see tsbench.core.registry). A target is a `Harness` subclass (harness/base.py)
or, from a plugin, a bare episode function, played with the default capabilities."""

from __future__ import annotations

import functools

from tsbench.core.errors import UserError
from tsbench.core.registry import Registry
from tsbench.harness.base import FunctionHarness, Harness

HARNESSES = Registry(
    "harness",
    {
        "single-pass-text": "tsbench.harness.single_pass:SinglePassText",
        "single-pass-image": "tsbench.harness.single_pass:SinglePassImage",
        "rlm": "tsbench.harness.rlm:RLM",
        "rlm-image": "tsbench.harness.rlm:RLMImage",
        "tools": "tsbench.harness.tools:Tools",
        "tools-image": "tsbench.harness.tools:ToolsImage",
        "direct": "tsbench.harness.direct:Direct",
        "series": "tsbench.harness.series:Series",  # TSLMs: the values beside the prompt, no text
        "file-agent": "tsbench.harness.file_agent:FileAgent",
    },
)


@functools.cache
def get_harness(name: str) -> Harness:
    """The harness `name` stands for (an unknown name is a UserError listing the choices)."""
    found = HARNESSES.load(name)
    if isinstance(found, type) and issubclass(found, Harness):
        harness = found()
    elif isinstance(found, Harness):
        harness = found
    elif callable(found):
        harness = FunctionHarness(found)
    else:
        raise UserError(f"harness {name!r} is neither a Harness nor an episode function (see tsbench/harness/base.py)")
    harness.name = name
    return harness


def settings_class(name: str) -> type:
    """The settings class the harness `name` plays with (what training builds its settings from)."""
    return get_harness(name).settings_class
