"""Prompt text for every harness: how the sandbox works, how to finish; never where anomalies are."""

from __future__ import annotations

import numpy as np

SINGLE_PASS_SYSTEM = (
    "You analyse time series. Read the data you are given, reason as briefly as you need, "
    "and end your reply with the answer in exactly the format the question asks for."
)

RLM_SYSTEM = """You analyse long time series by writing Python that runs in a persistent Jupyter kernel.

The data is already loaded in the kernel:
- `series`: a dict {{channel name: numpy float array}}, full resolution
- `L`: the number of samples per channel; `channels`: the list of channel names
- the same data as JSON in the file `context.json` in the working directory
numpy (as np) and scipy are imported. Variables persist between your code blocks.{extras}

To run code, put it in a fenced block:
```python
print(series[channels[0]][:10])
```
All blocks in one reply run in order; you then see their printed output, the value of the last
expression and any error (long output is cut to {obs_chars} characters, so print summaries, not
whole arrays). You have at most {max_turns} replies. When you are done, reply WITHOUT any code
block: that reply is your final answer, in exactly the format the question asks for."""

IMAGE_EXTRA = (
    "\nmatplotlib works (Agg backend): figures you create are shown to you after the block runs (at most 2 per turn)."
)
SUB_RLM_EXTRA = (
    "\n`sub_rlm(question: str, data: dict | None = None) -> str` asks a helper agent like you to answer a "
    "question about `data` (a dict {{name: array}}; default: the full series) in its own kernel and returns its final message."
)

FINAL_TURN_NOTICE = (
    "FINAL TURN: your turn budget is exhausted and code execution is disabled. "
    "State your final answer NOW, in exactly the format the question asks for, without any code block."
)


def rlm_system_prompt(*, image: bool, depth: int, max_turns: int, obs_chars: int) -> str:
    extras = (IMAGE_EXTRA if image else "") + (SUB_RLM_EXTRA if depth > 0 else "")
    return RLM_SYSTEM.format(extras=extras, obs_chars=obs_chars, max_turns=max_turns)


def observation_message(observations: list[str], n_images: int) -> str:
    body = "\n".join(observations) if observations else "(no output)"
    note = f"\n[{n_images} figure(s) attached]" if n_images else ""
    return f"Output:\n{body}{note}"


def serialize_values(channel_names: list[str], values: np.ndarray, budget_chars: int) -> tuple[str, int]:
    """Channel blocks of comma-separated values, keeping every k-th sample for the smallest k that fits."""

    def render(k: int) -> str:
        blocks = []
        for name, x in zip(channel_names, values):
            kept = np.round(x[::k].astype(np.float64), 3).tolist()  # Python floats format faster than numpy scalars
            blocks.append(f"{name}: " + ",".join(map("{:g}".format, kept)))
        return "\n".join(blocks)

    length = values.shape[1]
    # Estimate characters per value from a sample, then confirm (and step up) with the real text.
    probe_stride = max(1, length // 2000)
    probe = render(probe_stride)
    per_value = len(probe) / max(1, sum(len(x[::probe_stride]) for x in values))
    k = max(1, int(np.ceil(per_value * values.size / budget_chars)))
    text = probe if k == probe_stride else render(k)  # short series: the probe is the text, rendered once
    while len(text) > budget_chars and k < length:
        k = int(np.ceil(k * len(text) / budget_chars)) + (0 if len(text) <= budget_chars else 1)
        text = render(k)
    return text, k


def single_pass_text_prompt(
    question: str, channel_names: list[str], values: np.ndarray, budget_chars: int
) -> tuple[str, int]:
    data, k = serialize_values(channel_names, values, budget_chars)
    length = values.shape[1]
    if k == 1:
        note = f"All {length} samples of each channel follow (index 0 first)."
    else:
        note = (
            f"The series has {length} samples per channel; to fit, only every {k}-th sample is shown "
            f"(sample indices 0, {k}, {2 * k}, ...). Answer in ORIGINAL sample indices."
        )
    return f"{question}\n\n{note}\n{data}", k


def single_pass_image_prompt(question: str, channel_names: list[str], length: int) -> str:
    return (
        f"{question}\n\nThe attached image plots the series: {len(channel_names)} channel(s) "
        f"({', '.join(channel_names)}) stacked over a shared sample-index axis from 0 to {length - 1}."
    )
