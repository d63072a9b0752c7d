"""Single-pass harnesses: one model reply, no code; the signal is in the first message (text or image)."""

from __future__ import annotations

import hashlib

from tsbench.core.episode import EpisodeResult, EpisodeTask
from tsbench.harness.accounting import unfinished
from tsbench.harness.base import Harness
from tsbench.harness.plots import render_series_png
from tsbench.harness.prompts import SINGLE_PASS_SYSTEM, single_pass_image_prompt
from tsbench.harness.settings import HarnessSettings
from tsbench.harness.text_budget import fitted_text_prompt
from tsbench.models.base import Agent, ChatModel, Message


def image_user_message(task: EpisodeTask) -> tuple[Message, dict]:
    """single-pass-image's question with its plot (SFT on image traces builds the same prompt)."""
    png = task.image or render_series_png(task.channel_names, task.values)
    # A family's own image comes with a question that already says what it shows (TimerBed).
    text = task.question if task.image else single_pass_image_prompt(task.question, task.channel_names, task.length)
    return Message("user", text, images=[png]), {"image_sha256": hashlib.sha256(png).hexdigest()[:16]}


def run_single_pass(model: ChatModel, task: EpisodeTask, cfg: HarnessSettings, *, image: bool) -> EpisodeResult:
    if image:
        user, meta = image_user_message(task)
    else:
        text, stride, fit = fitted_text_prompt(model, SINGLE_PASS_SYSTEM, task, cfg.text_budget_chars, cfg.max_tokens)
        user = Message("user", text)
        meta = {"stride": stride, **fit}
    messages = [Message("system", SINGLE_PASS_SYSTEM), user]
    completion = model.generate(messages, max_tokens=cfg.max_tokens, temperature=cfg.temperature, task=task.info())
    # A reply the token cap cut off is never the answer (harness/accounting.py): this is the only turn.
    result = EpisodeResult(final_message="" if unfinished(completion, cfg) else completion.text)
    result.add_completion(completion)
    result.transcript = [
        {"role": "system", "content": SINGLE_PASS_SYSTEM},
        {"role": "user", "content": _abridged(user.content), "images": len(user.images), **meta},
        {
            "role": "assistant",
            "content": completion.text,
            "input_tokens": completion.input_tokens,
            "output_tokens": completion.output_tokens,
            "latency_s": round(completion.latency_s, 3),
            "finish_reason": completion.extra.get("finish_reason"),
        },
    ]
    return result


def _abridged(text: str, keep: int = 4000) -> str:
    """Transcripts keep the question and the start of the serialized data, not megabytes of numbers."""
    if len(text) <= keep:
        return text
    return text[:keep] + f"\n[... {len(text) - keep} characters of serialized values omitted from the transcript ...]"


class SinglePassText(Harness[HarnessSettings]):
    """`single-pass-text`: the values written into the prompt (every k-th sample when they do not fit)."""

    def run(self, agent: Agent, task: EpisodeTask, cfg: HarnessSettings) -> EpisodeResult:
        return run_single_pass(agent, task, cfg, image=bool(self.images))


class SinglePassImage(SinglePassText):
    """`single-pass-image`: one picture of the series in the first message."""

    images = "prompt"
