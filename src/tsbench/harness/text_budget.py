"""The single-pass text prompt sized to the model's context, not only to a character count.

`text_budget_chars` stays the upper bound. Where the model's context is known (models/context.py),
the prompt must also leave room for the reply (`max_tokens`, else the model's own cap, else
`DEFAULT_REPLY_TOKENS`): with the model's tokenizer the rendered prompt is counted and the stride
raised until it fits; without one, characters are converted at a conservative rate. A prompt whose
question alone cannot fit is sent as it is, and the model's own error says so.
"""

from __future__ import annotations

from tsbench.harness.prompts import single_pass_text_prompt
from tsbench.models.base import Message
from tsbench.models.context import UNKNOWN_TOKENIZER_CHARS_PER_TOKEN, model_context_tokens, prompt_tokens

DEFAULT_REPLY_TOKENS = 1024
SLACK_TOKENS = 16  # special tokens a server may add beyond the chat template
MAX_REFITS = 8
PROSE_CHARS_PER_TOKEN = 3.0  # English instructions run ~4 characters a token; 3 leaves a margin
TEMPLATE_TOKENS = 64  # the chat template's role markers and the stride note


def reply_room(model: object, max_tokens: int | None) -> int:
    return max_tokens or getattr(model, "max_new_tokens", None) or DEFAULT_REPLY_TOKENS


def fitted_text_prompt(
    model: object, system: str, task: object, budget_chars: int, max_tokens: int | None
) -> tuple[str, int, dict]:
    """(user text, stride, notes): the values at the smallest stride whose prompt fits the context."""
    question, names, values = task.question, task.channel_names, task.values
    context = model_context_tokens(model)
    if context is None:
        text, stride = single_pass_text_prompt(question, names, values, budget_chars)
        return text, stride, {}
    room = context - reply_room(model, max_tokens) - SLACK_TOKENS
    notes: dict = {"context_tokens": context, "prompt_token_room": room}
    if room <= 0:
        text, stride = single_pass_text_prompt(question, names, values, budget_chars)
        return text, stride, notes

    def measure(text: str) -> int | None:
        return prompt_tokens(model, [Message("system", system), Message("user", text)])

    fixed = measure(single_pass_text_prompt(question, names, values[:, :1], 1)[0])
    if fixed is None:  # no tokenizer here: convert at rates that never overfill
        overhead = (len(system) + len(question)) / PROSE_CHARS_PER_TOKEN + TEMPLATE_TOKENS
        budget = min(budget_chars, max(1, int((room - overhead) * UNKNOWN_TOKENIZER_CHARS_PER_TOKEN)))
        text, stride = single_pass_text_prompt(question, names, values, budget)
        notes["budget_chars"] = budget
        return text, stride, notes
    budget = budget_chars
    for _ in range(MAX_REFITS):
        text, stride = single_pass_text_prompt(question, names, values, budget)
        used = measure(text)
        notes.update(prompt_tokens=used, budget_chars=budget)
        if used <= room or stride >= values.shape[1]:
            return text, stride, notes
        # The values' share of the prompt, scaled to the room left for them (5 % under, to converge).
        data_chars = max(1, len(text) - len(question))
        per_token = data_chars / max(1, used - fixed)
        budget = max(1, min(budget - 1, int((room - fixed) * per_token * 0.95)))
    return text, stride, notes
