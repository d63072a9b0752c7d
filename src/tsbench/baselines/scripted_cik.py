"""`scripted/cik-persistence` (formerly `scripted-cik/persistence`): a deterministic CiK forecaster that sees only what a model sees.

It forecasts the last history value of the prompt's <history> block for every horizon step (the
levels 0.1, 0.5, 0.9 spread by 1 % of the level, in TimeClaw's quantile format), shifted by the amount
a retrieved precedent's rationale states ("lift the forecast by X"). Under the tools harness it calls
an evolved tool whose name starts with `forecast_` when one is offered and answers with the per-step
quantiles of that tool's samples (shifted the same way). It is the ablation board's offline driver:
memory and evolution change its answers only through the prompt and the tools.
"""

from __future__ import annotations

import json
import re

import numpy as np

from tsbench.models.base import Agent, Completion, Message, TaskInfo, ToolCall

LIFT = re.compile(r"lift the forecast by (-?\d+(?:\.\d+)?)")
HORIZON = re.compile(r"at these (\d+) timestamps")
LEVELS = [0.1, 0.5, 0.9]


def _answer(rows: list[list[float]]) -> str:
    """TimeClaw's quantile answer: one row per step, one value per level, in a ```json fence."""
    return "```json\n" + json.dumps({"levels": LEVELS, "samples": rows}) + "\n```"


def _last_value(text: str) -> float:
    block = text.split("<history>", 1)[-1].split("</history>", 1)[0]
    rows = [line for line in block.splitlines() if line.startswith("(")]
    return float(rows[-1].rstrip(")").split(",")[-1]) if rows else 0.0


class PersistencePolicy(Agent):
    plays = ("tools", "single-pass-text")
    name = "scripted/cik-persistence"

    @classmethod
    def native_tools(cls) -> bool:
        return True

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens=None,
        temperature=None,
        task: TaskInfo | None = None,
        tools=None,
        tool_choice=None,
    ) -> Completion:
        text = "\n".join(str(m.content) for m in messages if m.role in ("system", "user"))
        tokens = len(text) // 4
        offered = [t["function"]["name"] for t in tools or [] if t["function"]["name"].startswith("forecast_")]
        observed = [m for m in messages if m.role == "tool"]
        if offered and not observed and tool_choice != "none":
            return Completion("", input_tokens=tokens, tool_calls=[ToolCall("call_0", offered[0], "{}")])
        lifts = LIFT.findall(text)
        lift = float(lifts[0]) if lifts else 0.0
        if observed:
            found = json.loads(str(observed[-1].content))
            if isinstance(found, dict) and "samples" in found:
                steps = np.quantile(np.asarray(found["samples"], dtype=float) + lift, LEVELS, axis=0).T
                return Completion(_answer(np.round(steps, 6).tolist()), input_tokens=tokens)
        horizon = int(HORIZON.search(text).group(1)) if HORIZON.search(text) else 1
        level = _last_value(text) + lift
        rows = [[round(level * (1 + d), 6) for d in (-0.01, 0.0, 0.01)]] * horizon
        return Completion(_answer(rows), input_tokens=tokens, output_tokens=20)
