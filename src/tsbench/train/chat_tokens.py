"""Chat-template arithmetic on token ids, so a policy's history is never decoded and re-tokenised.

A first prompt is the template applied to the messages. Every later prompt is the previous prompt + the
previous reply's ids exactly as generated + the ids of what the template puts after a reply, around the
new messages (the observation) and before the next reply. That tail is read off a render whose assistant
turn holds a marker. A vision-language policy (`ChatTokens(tokenizer, processor)`) puts the first prompt's
images through the processor (models/local_vlm.py `encode_messages`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tsbench.models.base import Message, ModelError

if TYPE_CHECKING:
    from tsbench.models.local_vlm import Encoded

_MARK = "\u2063TSBENCH-REPLY\u2063"  # stands in for a reply when reading the template's tail
_REASONING_PROBE = "tsbench-reasoning-probe"  # reasoning text whose survival in a rendered history is checked


class ChatTokens:
    """Token ids for a first prompt, and for what follows a generated reply."""

    def __init__(self, tokenizer: Any, processor: Any = None):
        self.tokenizer = tokenizer
        self.processor = processor
        self.has_template = bool(getattr(tokenizer, "chat_template", None))
        self.eos_ids = eos_token_ids(tokenizer)

    def _render(self, chat: list[dict[str, str]], generation_prompt: bool) -> str:
        if self.has_template:
            return self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=generation_prompt)
        # a base model without a template: plain "role: text" lines, as models/local_hf.py does
        return "".join(f"{m['role']}: {m['content']}\n" for m in chat) + ("assistant: " if generation_prompt else "")

    def _encode(self, text: str, *, special: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def first_prompt_vision(self, messages: Sequence[Message]) -> tuple[list[int], Encoded | None]:
        """A first prompt's ids and, for a vision-language policy, its `Encoded` (None for a text policy)."""
        if self.processor is None:
            if any(m.images for m in messages):
                raise ModelError("bad_request", "a text-only policy cannot see images (train a vision-language model)")
            return self.first_prompt(messages), None
        from tsbench.models.local_vlm import encode_messages

        first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
        if any(m.images for i, m in enumerate(messages) if i != first_user):  # TRL's loss puts them there only
            raise ModelError("bad_request", "images outside the first user message are not trained on")
        encoded = encode_messages(self.processor, list(messages))
        return encoded.ids, encoded

    def first_prompt(self, messages: Sequence[Message]) -> list[int]:
        return self._encode(self._render(_chat(messages), True), special=not self.has_template)

    def continuation(self, reply_ids: Sequence[int], new_messages: Sequence[Message]) -> list[int]:
        """Ids that close a reply and add the new messages plus the next generation prompt."""
        if any(m.images for m in new_messages):
            raise ModelError(
                "bad_request", "images after the first prompt are not trained on (use a single-pass harness)"
            )
        dummy = [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": _MARK},
        ]
        text = self._render(dummy + _chat(new_messages), True)
        at = text.rfind(_MARK)
        if at < 0:
            raise RuntimeError("the chat template drops assistant content; cannot extend a conversation by ids")
        tail = text[at + len(_MARK) :]
        if reply_ids and reply_ids[-1] in self.eos_ids:  # the reply already closed itself with an end token
            end_text = self.tokenizer.decode([reply_ids[-1]])
            if end_text and tail.startswith(end_text):
                tail = tail[len(end_text) :]
        return self._encode(tail, special=False)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def keeps_earlier_reasoning(self) -> bool:
        """Does a later prompt, as the template renders it, still show an earlier reply's reasoning?

        Training extends each prompt by the reply's ids as generated, so the policy learns later turns
        with its earlier reasoning in view; an eval that re-renders the history through a template that
        drops it (Qwen3-style) shows the model a different context than it was trained on."""
        if not self.has_template:
            return True
        chat = [
            {"role": "user", "content": "U1"},
            {"role": "assistant", "content": f"<think>{_REASONING_PROBE}</think>A1"},
            {"role": "user", "content": "U2"},
        ]
        return _REASONING_PROBE in self._render(chat, True)


def _chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def eos_token_ids(tokenizer: Any, model: Any = None) -> set[int]:
    ids: set[int] = set()
    for eos in (getattr(getattr(model, "generation_config", None), "eos_token_id", None), tokenizer.eos_token_id):
        if eos is not None:
            ids.update([eos] if isinstance(eos, int) else list(eos))
    return ids


def cut_at_eos(ids: Sequence[int], eos_ids: set[int], limit: int) -> list[int]:
    """The reply as generated: up to and including the first end token, at most `limit` ids."""
    out = []
    for token in list(ids)[:limit]:
        out.append(int(token))
        if token in eos_ids:
            break
    return out
