"""The live policy as a ChatModel, so rollouts run through the real harness (`tsbench.harness.play`).

* `ChatTokens` does the chat-template arithmetic. A first prompt is the template applied to the
  messages. Every later prompt is the previous prompt + the previous reply's ids exactly as
  generated + the ids of what the template puts after a reply, around the new messages (the
  observation) and before the next reply. That tail is read off a render whose assistant turn holds
  a marker, so history is never decoded and re-tokenised.
* A backend turns prompt ids into reply ids: `HFBackend` (transformers `generate` on the training
  model itself), `VLLMColocate` (TRL's in-process vLLM, weights synced by TRL) or `VLLMServer`
  (`trl vllm-serve`, weights synced by TRL). `Batcher` lets the episode threads share one backend.
* `PolicyAgent` is one episode's ChatModel: it keeps that episode's turns for the loss. With
  `rendered=True` (reasoning_history as-rendered) every prompt is instead the template's render of the
  whole conversation, exactly as eval's local model renders it, so a template that drops earlier
  reasoning shows the policy in training what it shows it in eval; each turn then trains as its own row.
* A vision-language policy (`ChatTokens(tokenizer, processor)`): the first prompt's images go through
  the processor (models/local_vlm.py `encode_messages`), its pixel inputs ride on every request of the
  episode, and the episode keeps the conversation and images TRL re-renders for the loss forward.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tsbench.models.base import Completion, Message, ModelError, TaskInfo

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

    def first_prompt_vision(self, messages: Sequence[Message]) -> tuple[list[int], Any]:
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


# -- backends ------------------------------------------------------------------------------------
@dataclass
class Request:
    prompt_ids: list[int]
    max_new_tokens: int
    temperature: float
    seed: int
    vision: dict[str, Any] = field(default_factory=dict)  # the processor's pixel inputs for these ids (a VLM)
    images: list[Any] = field(default_factory=list)  # the same images as PIL (what vLLM takes beside the ids)


@dataclass
class Reply:
    ids: list[int]
    logprobs: list[float] | None = None  # the sampler's log pi(token), when the backend reports it


class Backend(Protocol):
    def generate(self, requests: list[Request]) -> list[Reply]: ...


class HFBackend:
    """transformers `generate` with plain temperature sampling (no top-k/top-p), so the samples come
    from exactly the distribution the loss scores. One batch = one seed, derived from its requests."""

    def __init__(self, model: Any, tokenizer: Any):
        self.model = model
        self.eos_ids = eos_token_ids(tokenizer, model)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def generate(self, requests: list[Request]) -> list[Reply]:
        import torch
        from transformers import GenerationConfig

        device = next(self.model.parameters()).device
        width = max(len(r.prompt_ids) for r in requests)
        ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, r in enumerate(requests):  # left padding: every prompt ends where generation starts
            ids[row, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[row, width - len(r.prompt_ids) :] = 1
        temperature = requests[0].temperature
        vision = batch_vision([r.vision for r in requests], [len(r.prompt_ids) for r in requests], width)
        config = GenerationConfig(
            max_new_tokens=max(r.max_new_tokens for r in requests),
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_k=0 if temperature > 0 else None,
            top_p=1.0 if temperature > 0 else None,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(self.eos_ids) or None,
            # a sampled image token would not match the image features in the loss forward (as TRL does)
            suppress_tokens=vision_token_ids(self.model) or None,
        )
        digest = hashlib.sha256(repr(sorted(r.seed for r in requests)).encode()).digest()
        torch.manual_seed(int.from_bytes(digest[:4], "little"))
        # fp32 master weights on a GPU sample in bf16, the precision the loss is computed in (mixed precision)
        mixed = device.type == "cuda" and next(self.model.parameters()).dtype == torch.float32
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=mixed):
            out = self.model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                generation_config=config,
                **{k: v.to(device) for k, v in vision.items()},
            )
        return [Reply(cut_at_eos(g, self.eos_ids, r.max_new_tokens)) for g, r in zip(out[:, width:].tolist(), requests)]


def vision_token_ids(model: Any) -> list[int]:
    """A VLM's image and video placeholder ids (never to be generated); [] for a text model."""
    config = getattr(model, "config", None)
    ids = [getattr(config, key, None) for key in ("image_token_id", "video_token_id", "image_token_index")]
    return sorted({int(i) for i in ids if isinstance(i, int)})


def batch_vision(inputs: list[dict[str, Any]], lengths: list[int], width: int) -> dict[str, Any]:
    """The requests' pixel inputs as one batch, as TRL batches them for its loss: per-image tensors
    concatenated along the first axis; per-token ones (of the first prompt) zero-extended to each
    request's prompt length (a later turn's ids add no image) and left-padded to `width`."""
    import torch

    if not any(inputs):
        return {}
    if not all(inputs):
        raise ValueError("a batch mixes requests with and without images")
    from tsbench.models.local_vlm import PER_TOKEN_KEYS

    out = {}
    for key in inputs[0]:
        parts = [x[key] for x in inputs]
        if key in PER_TOKEN_KEYS:
            padded = torch.zeros((len(parts), width), dtype=parts[0].dtype)
            for row, (part, length) in enumerate(zip(parts, lengths)):
                start = width - length
                padded[row, start : start + part.shape[-1]] = part.reshape(-1)
            out[key] = padded
        else:
            out[key] = torch.cat(parts, dim=0)
    return out


class VLLMColocate:
    """TRL's in-process vLLM (GRPOConfig vllm_mode="colocate"); TRL pushes the weights before each step."""

    def __init__(self, llm: Any):
        self.llm = llm

    def generate(self, requests: list[Request]) -> list[Reply]:
        from vllm import SamplingParams

        params = [
            SamplingParams(
                n=1, temperature=r.temperature, top_p=1.0, top_k=0, max_tokens=r.max_new_tokens, logprobs=0, seed=r.seed
            )
            for r in requests
        ]
        # TRL's own vision-language vLLM path: the processor's ids (image tokens expanded) + the PIL images
        prompts = [
            {"prompt_token_ids": list(r.prompt_ids)}
            | ({"multi_modal_data": {"image": r.images if len(r.images) > 1 else r.images[0]}} if r.images else {})
            for r in requests
        ]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        replies = []
        for output in outputs:
            sample = output.outputs[0]
            logprobs = [entry[token].logprob for token, entry in zip(sample.token_ids, sample.logprobs or [])]
            replies.append(Reply(list(sample.token_ids), logprobs if len(logprobs) == len(sample.token_ids) else None))
        return replies


class BackendError(RuntimeError):
    """The generator failed past its retries: the rollout (and so the step) stops, never trains on failures."""


def with_retries(call: Any, *, attempts: int = 3, wait_s: float = 2.0, what: str = "the vLLM server") -> Any:
    """`call()`, tried `attempts` times with doubling waits, then a BackendError naming the last error.
    TRL's client retries only 500/502/503 and raises a bare Exception for any other status (a 400 from
    an overlong prompt, a 4xx from a restarted server); an episode would record that as its own
    failure, so a whole batch would silently become infrastructure failures."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            last = exc
            if attempt < attempts:
                time.sleep(wait_s * 2 ** (attempt - 1))
    raise BackendError(f"{what} failed {attempts} times; last error: {last}") from last


class VLLMServer:
    """A `trl vllm-serve` server (GRPOConfig vllm_mode="server"); TRL pushes the weights before each step."""

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 240.0,
        attempts: int = 3,
        wait_s: float = 2.0,
        image_token_id: int | None = None,
    ):
        from trl.generation.vllm_client import VLLMClient

        self.client = VLLMClient(base_url=base_url, connection_timeout=timeout_s)
        self.attempts, self.wait_s = attempts, wait_s
        self.image_token_id = image_token_id

    def features(self, requests: list[Request]) -> list[dict | None] | None:
        """TRL's server path for images: the server processes them on their own (`image_features`), and
        each result is pointed at the runs of image tokens in the request's own ids."""
        if not any(r.images for r in requests):
            return None
        found = with_retries(lambda: self.client.image_features([r.images or None for r in requests]))
        return [
            place_image_features(f, r.prompt_ids, self.image_token_id) if f is not None else None
            for f, r in zip(found, requests)
        ]

    def generate(self, requests: list[Request]) -> list[Reply]:
        replies: list[Reply] = [Reply([]) for _ in requests]
        by_settings: dict[tuple[int, float], list[int]] = {}
        for i, r in enumerate(requests):
            by_settings.setdefault((r.max_new_tokens, r.temperature), []).append(i)
        for (max_tokens, temperature), members in by_settings.items():
            features = self.features([requests[i] for i in members])
            out = with_retries(
                lambda members=members, max_tokens=max_tokens, temperature=temperature, features=features: (
                    self.client.generate(
                        prompts=[requests[i].prompt_ids for i in members],
                        **({"features": features} if features is not None else {}),
                        n=1,
                        temperature=temperature,
                        top_p=1.0,
                        top_k=0,
                        max_tokens=max_tokens,
                        logprobs=0,
                    )
                ),
                attempts=self.attempts,
                wait_s=self.wait_s,
            )
            for k, i in enumerate(members):
                logprobs = out["logprobs"][k] if out.get("logprobs") else None
                replies[i] = Reply(
                    list(out["completion_ids"][k]), None if logprobs is None else [lp[0] for lp in logprobs]
                )
        return replies


def place_image_features(features: dict, prompt_ids: list[int], image_token_id: int | None) -> dict:
    """`features` (from the server's `image_features`) with its image placeholders at the runs of
    `image_token_id` in `prompt_ids`: one run per image, in order."""
    runs, at = [], 0
    while at < len(prompt_ids):
        if prompt_ids[at] != image_token_id:
            at += 1
            continue
        start = at
        while at < len(prompt_ids) and prompt_ids[at] == image_token_id:
            at += 1
        runs.append({"offset": start, "length": at - start})
    wanted = len(features["mm_placeholders"]["image"])
    if len(runs) != wanted:
        raise ValueError(f"{len(runs)} runs of image tokens in the prompt for {wanted} processed images")
    return {**features, "mm_placeholders": {**features["mm_placeholders"], "image": runs}}


class Batcher:
    """Episode threads share one backend: each asks for one reply; waiting requests go out as one batch.

    With `wait_s=None` a batch leaves only when every episode that can be running is waiting:
    min(workers, episodes not yet finished), when the caller says how many there are, else the
    episodes inside `episode()`. Each batch is then one round of every live episode, whatever the
    threads' timing, so a seeded CPU run is reproducible. With a float, a batch leaves after that long.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        wait_s: float | None = None,
        episodes: int | None = None,
        workers: int | None = None,
        max_batch: int = 256,
    ):
        self.backend = backend
        self.wait_s = wait_s
        self.pending = episodes  # episodes of this rollout not yet finished
        self.slots = workers or episodes
        self.max_batch = max_batch
        self.running = 0
        self.batches = 0
        self.failure: BaseException | None = None  # the first error the backend raised (the rollout re-raises it)
        self._queue: list[dict[str, Any]] = []
        self._leading = False
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def episode(self) -> Iterator[None]:
        with self._cond:
            self.running += 1
        try:
            yield
        finally:
            with self._cond:
                self.running -= 1
                if self.pending is not None:
                    self.pending -= 1
                self._cond.notify_all()

    def _ready(self, deadline: float | None) -> bool:
        live = self.running if self.pending is None else min(self.slots, self.pending)
        if len(self._queue) >= min(max(live, 1), self.max_batch):
            return True
        return deadline is not None and time.monotonic() >= deadline

    def generate(self, request: Request) -> Reply:
        slot: dict[str, Any] = {"request": request, "done": False, "reply": None, "error": None}
        with self._cond:
            self._queue.append(slot)
            self._cond.notify_all()
            while not slot["done"]:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                deadline = None if self.wait_s is None else time.monotonic() + self.wait_s
                while not self._ready(deadline):
                    self._cond.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
                batch.sort(key=lambda s: (s["request"].seed, s["request"].prompt_ids))  # not the threads' arrival order
                self._cond.release()
                try:
                    replies, error = self.backend.generate([s["request"] for s in batch]), None
                except BaseException as exc:  # every waiter of this batch gets the error
                    replies, error = None, exc
                    self.failure = self.failure or exc
                finally:
                    self._cond.acquire()
                for i, s in enumerate(batch):
                    s.update(done=True, reply=None if replies is None else replies[i], error=error)
                self.batches += 1
                self._leading = False
                self._cond.notify_all()
        if slot["error"] is not None:
            raise slot["error"]
        return slot["reply"]


# -- one episode's chat model --------------------------------------------------------------------
@dataclass
class Turn:
    prompt_ids: list[int]
    output_ids: list[int]
    logprobs: list[float] | None
    limit: int = 0  # the most tokens the reply could take (its cap, or what was left of max_seq_len)

    def clipped(self, eos_ids: set[int]) -> bool:
        """The reply stopped at its cap, not at an end token."""
        return len(self.output_ids) >= self.limit and not (self.output_ids and self.output_ids[-1] in eos_ids)


@dataclass
class PolicyAgent:
    """ChatModel over the live policy for ONE episode; `turns` keeps every reply's ids as generated."""

    batcher: Batcher
    chat: ChatTokens
    max_new_tokens: int = 4096
    max_seq_len: int = 65536
    temperature: float = 1.0
    seed: int = 0
    name: str = "policy"
    turns: list[Turn] = field(default_factory=list)
    vision: Any = None  # the first prompt's `Encoded` (a vision-language policy): images, conversation, pixels
    rendered: bool = False  # every prompt re-rendered through the chat template, as eval renders it
    _history: list[tuple[str, str]] = field(default_factory=list)

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
    ) -> Completion:
        started = time.perf_counter()
        if not self.turns:
            prompt, self.vision = self.chat.first_prompt_vision(messages)
        elif self.rendered:  # eval's context: the template decides what of the earlier replies stays
            prompt = self.chat.first_prompt(messages)
        else:
            if [(m.role, m.content) for m in messages[: len(self._history)]] != self._history:
                raise RuntimeError("the conversation changed between turns; its token ids would no longer match")
            last = self.turns[-1]
            prompt = (
                last.prompt_ids
                + last.output_ids
                + self.chat.continuation(last.output_ids, messages[len(self._history) :])
            )
        limit = min(max_tokens or self.max_new_tokens, self.max_seq_len - len(prompt))
        if limit < 1:
            raise ModelError(
                "bad_request",
                f"context full: a prompt of {len(prompt)} tokens leaves no room under max_seq_len {self.max_seq_len}",
            )
        temp = self.temperature if temperature is None else temperature
        seed = (self.seed + 7919 * len(self.turns)) % 2**31
        pixels = self.vision.inputs if self.vision is not None else {}
        images = list(self.vision.images) if self.vision is not None else []
        reply = self.batcher.generate(Request(prompt, limit, temp, seed, pixels, images))
        text = self.chat.decode(reply.ids)
        self.turns.append(Turn(prompt, list(reply.ids), reply.logprobs, limit))
        self._history = [(m.role, m.content) for m in messages] + [("assistant", text)]
        stopped = bool(reply.ids) and reply.ids[-1] in self.chat.eos_ids
        return Completion(
            text=text,
            input_tokens=len(prompt),
            output_tokens=len(reply.ids),
            latency_s=time.perf_counter() - started,
            prompt_token_ids=list(prompt),
            output_token_ids=list(reply.ids),
            extra={"finish_reason": "stop" if stopped else "length"},
        )

    def close(self) -> None:
        """The backend outlives the episode."""


def assemble(turns: Sequence[Turn]) -> tuple[list[int], list[int], list[int], list[float] | None]:
    """One episode as TRL wants it: (first prompt ids, completion ids, env mask, sampler logprobs).

    Turn k's prompt must begin with every id of the turns before it; the ids it adds (template
    glue, observation, next generation prompt) get mask 0, the model's outputs mask 1. Logprobs
    are given only when every turn has them (0.0 on masked ids)."""
    if not turns:
        return [], [], [], None
    prompt = list(turns[0].prompt_ids)
    ids, mask = list(prompt), []
    logprobs: list[float] | None = []
    for number, turn in enumerate(turns, 1):
        if turn.prompt_ids[: len(ids)] != ids:
            raise ValueError(f"turn {number}'s prompt does not extend the ids of the turns before it")
        shown = turn.prompt_ids[len(ids) :]
        ids += shown + turn.output_ids
        mask += [0] * len(shown) + [1] * len(turn.output_ids)
        if logprobs is not None and turn.logprobs is not None and len(turn.logprobs) == len(turn.output_ids):
            logprobs += [0.0] * len(shown) + list(turn.logprobs)
        else:
            logprobs = None
    return prompt, ids[len(prompt) :], mask, logprobs
