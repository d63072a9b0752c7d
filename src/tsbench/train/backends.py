"""What turns prompt ids into reply ids for training rollouts: `HFBackend` (transformers `generate` on the
training model itself), `VLLMColocate` (TRL's in-process vLLM) or `VLLMServer` (`trl vllm-serve`); TRL
syncs the weights of both vLLM kinds before each step."""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from tsbench.train.chat_tokens import cut_at_eos, eos_token_ids
from tsbench.train.vision_batch import batch_vision, vision_token_ids


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
            for i, reply in zip(members, server_replies(out, len(members))):
                replies[i] = reply
        return replies


MAX_TOKEN_ID = 2**31 - 1


def _token_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_ID


def _sampler_logprob(entry: Any) -> float | None:
    """The first logprob of a token's entry: a finite number <= 0 (a probability of at most 1)."""
    value = entry[0] if isinstance(entry, (list, tuple)) and entry else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value > 1e-3:
        return None
    return float(value)


def server_replies(out: Any, count: int) -> list[Reply]:
    """The server's generate answer as `count` replies, read without trusting it: ids that are not
    token ids (or a count of replies that is not `count`) stop the step as a BackendError; a reply's
    logprobs with a NaN, an infinity, a positive value, a string or the wrong length are dropped (its
    tokens then weigh nothing in the vLLM correction: rollouts.sampler_logprobs), never trained on."""
    ids = out.get("completion_ids") if isinstance(out, dict) else None
    if not isinstance(ids, list) or len(ids) != count:
        raise BackendError(f"the vLLM server sent no list of {count} completions")
    if not all(isinstance(row, list) and all(map(_token_id, row)) for row in ids):
        raise BackendError("the vLLM server sent a completion id that is not a token id")
    sent = out.get("logprobs")
    sent = sent if isinstance(sent, list) and len(sent) == count else [None] * count
    replies = []
    for row, entries in zip(ids, sent):
        values = (
            [_sampler_logprob(e) for e in entries] if isinstance(entries, list) and len(entries) == len(row) else []
        )
        replies.append(Reply(list(row), values if len(values) == len(row) and None not in values else None))
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
