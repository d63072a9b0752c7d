"""The live training policy as a ChatModel, so rollouts run through the real harness.

Three layers:

* `ChatTokens` does the chat-template arithmetic. A first turn's prompt is the template applied to
  the messages. Every later prompt is the previous prompt + the previous reply's token ids exactly
  as generated + the ids of what the template puts after a reply and around the new messages (the
  observation) and the next generation prompt. That tail is read off a template render whose
  assistant turn holds a marker, so history is never decoded and re-tokenised.
* Engines turn prompt ids into output ids: `HFEngine` (transformers `generate` on the training
  model itself, CPU or GPU) and `VLLMEngine` (vLLM's offline `LLM` in this process, weights pushed
  from the policy before every step). `BatchingEngine` lets the episode threads share one engine:
  requests that arrive together are generated as one batch.
* `PolicyChatModel` is one episode's ChatModel: it keeps that episode's turns (prompt ids, output
  ids) for the loss and refuses a history that changed under it.

`resolve_model` / `load_policy` turn `--model` into a trainable transformers model (optionally
wrapped in a PEFT LoRA), reusing models/local_hf.py for the smollm2 cache.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence

from tsbench.core.errors import UserError
from tsbench.models.base import Completion, Message, ModelError, TaskInfo
from tsbench.models.local_hf import dtype_option, offline_transformers
from tsbench.models.resolve import ModelSource, resolve_model as _resolve


def resolve_model(spec: str) -> ModelSource:
    try:
        return _resolve(spec)
    except ValueError as exc:
        raise UserError(str(exc)) from None



VLLM_MISSING = "--rollout-engine vllm needs vLLM on a GPU machine: pip install 'tsbench[gpu]' (or use --rollout-engine hf)"
_MARK = "\u2063TSBENCH-REPLY\u2063"  # stands in for a reply when reading the template's tail


def saved_base_record(source: ModelSource) -> str:
    """What a saved adapter should name as its base: a hub model is named by its local snapshot dir."""
    return source.base_record if source.local else (_hub_snapshot(source.weights) or source.weights)


def _hub_snapshot(repo_id: str) -> str | None:
    """The local snapshot dir of a hub model already in the HF cache (so a saved adapter names a base
    that `local/<dir>` can load offline), or None."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(repo_id, local_files_only=True)
    except Exception:  # not cached (yet), or not a valid repo id: keep the id itself
        return None


def _transformers(local: bool) -> Any:
    if local:
        return offline_transformers()
    import transformers

    return transformers


def load_tokenizer(source: ModelSource, checkpoint: Path | None = None) -> Any:
    transformers = _transformers(source.local)
    where = source.weights
    for candidate in (checkpoint, Path(source.adapter) if source.adapter else None):
        if candidate is not None and (candidate / "tokenizer_config.json").is_file():
            where = str(candidate)
            break
    tokenizer = transformers.AutoTokenizer.from_pretrained(where, local_files_only=source.local)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(
    source: ModelSource,
    *,
    lora_rank: int | None,
    lora_alpha: int | None = None,
    lora_dropout: float = 0.0,
    lora_target: str | list[str] = "all-linear",
    dtype: Any = None,
    checkpoint: Path | None = None,
) -> Any:
    """A trainable model: full weights, or the base frozen under a LoRA (new, the source's adapter,
    or the checkpoint's when resuming). A full-weight checkpoint replaces the source's weights."""
    import torch

    transformers = _transformers(source.local)
    options = {"local_files_only": source.local, **dtype_option(dtype or torch.float32)}
    if lora_rank is None:
        if checkpoint is not None:
            return transformers.AutoModelForCausalLM.from_pretrained(str(checkpoint), local_files_only=True,
                                                                     **dtype_option(dtype or torch.float32))
        model = transformers.AutoModelForCausalLM.from_pretrained(source.weights, **options)
        if source.adapter:  # full training that starts from a LoRA result: fold it in first
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, source.adapter).merge_and_unload()
        return model
    from peft import LoraConfig, PeftModel, get_peft_model

    model = transformers.AutoModelForCausalLM.from_pretrained(source.weights, **options)
    start = checkpoint if checkpoint is not None else (Path(source.adapter) if source.adapter else None)
    if start is not None:
        model = PeftModel.from_pretrained(model, str(start), is_trainable=True)
        for config in model.peft_config.values():  # the saved record may be a short name; peft wants the dir
            config.base_model_name_or_path = source.weights
        return model
    config = LoraConfig(
        r=lora_rank, lora_alpha=lora_alpha or 2 * lora_rank, lora_dropout=lora_dropout,
        target_modules=lora_target, task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


# -- chat template arithmetic ---------------------------------------------------------------------
class ChatTokens:
    """Token ids for a first prompt, and for what follows a generated reply."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.has_template = bool(getattr(tokenizer, "chat_template", None))
        self.eos_ids = eos_token_ids(tokenizer)

    def _render(self, chat: list[dict[str, str]], generation_prompt: bool) -> str:
        if self.has_template:
            return self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=generation_prompt)
        # a base model without a template: plain "role: text" lines, as models/local_hf.py does
        return "".join(f"{m['role']}: {m['content']}\n" for m in chat) + ("assistant: " if generation_prompt else "")

    def _encode(self, text: str, *, special: bool) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def first_prompt(self, messages: Sequence[Message]) -> list[int]:
        text = self._render(_chat(messages), True)
        return self._encode(text, special=not self.has_template)

    def continuation(self, reply_ids: Sequence[int], new_messages: Sequence[Message]) -> list[int]:
        """Ids that close a reply and add the new messages plus the next generation prompt."""
        dummy = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
                 {"role": "assistant", "content": _MARK}]
        text = self._render(dummy + _chat(new_messages), True)
        at = text.rfind(_MARK)
        if at < 0:
            raise RuntimeError("the chat template drops assistant content; cannot extend a conversation by ids")
        tail = text[at + len(_MARK):]
        if reply_ids and reply_ids[-1] in self.eos_ids:  # the reply already closed itself with an end token
            end_text = self.tokenizer.decode([reply_ids[-1]])
            if end_text and tail.startswith(end_text):
                tail = tail[len(end_text):]
        return self._encode(tail, special=False)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)


def _chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def eos_token_ids(tokenizer: Any, model: Any = None) -> set[int]:
    ids: set[int] = set()
    sources = [getattr(getattr(model, "generation_config", None), "eos_token_id", None), tokenizer.eos_token_id]
    for eos in sources:
        if eos is None:
            continue
        ids.update([eos] if isinstance(eos, int) else list(eos))
    return ids


# -- engines -------------------------------------------------------------------------------------
@dataclass
class GenRequest:
    prompt_ids: list[int]
    max_new_tokens: int
    temperature: float
    seed: int


class Engine(Protocol):
    def generate(self, requests: list[GenRequest]) -> list[list[int]]: ...

    def sync_weights(self, model: Any) -> None: ...

    def close(self) -> None: ...


def cut_at_eos(ids: Sequence[int], eos_ids: set[int], limit: int) -> list[int]:
    """The reply as generated: up to and including the first end token, at most `limit` ids."""
    out = []
    for token in list(ids)[:limit]:
        out.append(int(token))
        if token in eos_ids:
            break
    return out


class HFEngine:
    """transformers `generate` with plain temperature sampling (no top-k/top-p, no repetition penalty,
    so the samples come from exactly the distribution the loss scores).

    A fully trained policy generates itself. A LoRA policy gets a plain copy of its architecture
    holding the merged weights (refreshed by `sync_weights` before every step): generating through
    the adapter layers is several times slower on CPU.
    """

    def __init__(self, model: Any, tokenizer: Any, *, device: str, autocast_dtype: Any = None):
        self.separate = is_peft(model)
        if self.separate:
            import torch
            from transformers import AutoModelForCausalLM

            base = model.get_base_model()
            dtype = next(p for n, p in model.named_parameters() if "lora_" not in n).dtype
            generator = AutoModelForCausalLM.from_config(base.config, **dtype_option(dtype))
            generator.generation_config = base.generation_config
            self.model = generator.to(device).eval().requires_grad_(False)
            with torch.no_grad():
                self.sync_weights(model)
        else:
            self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.autocast_dtype = autocast_dtype
        self.eos_ids = eos_token_ids(tokenizer, model)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def generate(self, requests: list[GenRequest]) -> list[list[int]]:
        by_temperature: dict[float, list[int]] = {}
        for i, r in enumerate(requests):
            by_temperature.setdefault(float(r.temperature or 0.0), []).append(i)
        outputs: list[list[int]] = [[] for _ in requests]
        for temperature, members in by_temperature.items():
            for i, ids in zip(members, self._generate([requests[i] for i in members], temperature)):
                outputs[i] = ids
        return outputs

    def _generate(self, requests: list[GenRequest], temperature: float) -> list[list[int]]:
        import contextlib

        import torch
        from transformers import GenerationConfig

        width = max(len(r.prompt_ids) for r in requests)
        ids = torch.full((len(requests), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for row, r in enumerate(requests):  # left padding: every prompt ends where generation starts
            ids[row, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[row, width - len(r.prompt_ids):] = 1
        config = GenerationConfig(
            max_new_tokens=max(r.max_new_tokens for r in requests), do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None, top_k=0 if temperature > 0 else None,
            top_p=1.0 if temperature > 0 else None, pad_token_id=self.pad_id, eos_token_id=sorted(self.eos_ids) or None,
        )
        torch.manual_seed(requests[0].seed)
        autocast = (torch.autocast(device_type=self.device.split(":")[0], dtype=self.autocast_dtype)
                    if self.autocast_dtype is not None else contextlib.nullcontext())
        with torch.no_grad(), autocast:
            out = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                      generation_config=config)
        generated = out[:, width:].tolist()
        return [cut_at_eos(g, self.eos_ids, r.max_new_tokens) for g, r in zip(generated, requests)]

    def sync_weights(self, model: Any) -> None:
        """Copy the policy's (merged) weights into the generating copy; nothing to do without one."""
        if not self.separate:
            return
        import torch

        with torch.no_grad():
            params = dict(self.model.named_parameters())
            for name, value in export_weights(model):
                params[name].copy_(value)

    def close(self) -> None:
        self.model = None


def export_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """(name, tensor) pairs named as in the model's Hugging Face checkpoint. For a LoRA policy each
    adapted weight comes out as W + scale * B @ A, computed afresh: the base weights are never touched
    (merging and unmerging in place would let rounding drift into them over a run)."""
    if not is_peft(model):
        for name, param in model.named_parameters():
            yield name, param.data
        return
    adapted = {}
    for name, module in model.named_modules():
        if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer") and getattr(module, "lora_A", None):
            adapted[f"{name}.base_layer.weight"] = module
    for name, param in model.named_parameters():
        if "lora_" in name:
            continue
        value = param.data
        module = adapted.get(name)
        if module is not None:
            delta = sum(module.get_delta_weight(a) for a in module.active_adapters if a in module.lora_A)
            value = (value.float() + delta.float()).to(value.dtype)
        yield name.removeprefix("base_model.model.").replace(".base_layer", ""), value


class VLLMEngine:
    """vLLM's offline `LLM` in this process (single GPU, colocated with training)."""

    def __init__(self, weights: str, tokenizer_dir: str, *, max_seq_len: int, gpu_memory_utilization: float,
                 seed: int, sleep: bool = False):
        try:
            import vllm
        except ImportError:
            raise UserError(VLLM_MISSING) from None
        # One in-process worker, so the trainer can push weights into it.
        for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": "29517", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}.items():
            os.environ.setdefault(key, value)
        self._vllm = vllm
        self.sleep_between_steps = sleep
        self.llm = vllm.LLM(
            model=weights, tokenizer=tokenizer_dir, dtype="bfloat16", max_model_len=max_seq_len,
            gpu_memory_utilization=gpu_memory_utilization, enable_prefix_caching=True, seed=seed,
            distributed_executor_backend="external_launcher", enable_sleep_mode=sleep,
        )

    def generate(self, requests: list[GenRequest]) -> list[list[int]]:
        params = [self._vllm.SamplingParams(n=1, temperature=r.temperature, top_p=1.0, max_tokens=r.max_new_tokens,
                                            seed=r.seed) for r in requests]
        prompts = [{"prompt_token_ids": list(r.prompt_ids)} for r in requests]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return [list(o.outputs[0].token_ids)[: r.max_new_tokens] for o, r in zip(outputs, requests)]

    def sync_weights(self, model: Any) -> None:
        if self.sleep_between_steps:
            self.llm.wake_up()
        try:
            target = self.llm.llm_engine.model_executor.driver_worker.model_runner.model
        except AttributeError:
            raise RuntimeError("this vLLM version does not expose its in-process model "
                               "(llm_engine.model_executor.driver_worker.model_runner.model); cannot push weights") from None
        for name, tensor in export_weights(model):
            target.load_weights([(name, tensor)])
        self.llm.reset_prefix_cache()

    def after_rollouts(self) -> None:
        if self.sleep_between_steps:
            self.llm.sleep(level=1)  # free the KV cache (and offload weights) for the update

    def close(self) -> None:
        self.llm = None


class BatchingEngine:
    """Shares one engine between episode threads: the first waiting thread leads, waits briefly for the
    other running episodes to ask too, generates everything queued as one batch and hands results back."""

    def __init__(self, engine: Engine, *, max_batch: int = 256, wait_s: float = 0.05):
        self.engine = engine
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.running = 0  # episodes in flight: the most requests worth waiting for
        self._cond = threading.Condition()
        self._queue: list[dict[str, Any]] = []
        self._leading = False
        self.batches = 0
        self.requests = 0

    def episode(self) -> "_Running":
        return _Running(self)

    def generate(self, request: GenRequest) -> list[int]:
        slot: dict[str, Any] = {"request": request, "done": False, "output": None, "error": None}
        with self._cond:
            self._queue.append(slot)
            self._cond.notify_all()
            while not slot["done"]:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                deadline = time.monotonic() + self.wait_s
                while len(self._queue) < min(max(self.running, 1), self.max_batch):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch:]
                self._cond.release()
                try:
                    outputs, error = self.engine.generate([s["request"] for s in batch]), None
                except BaseException as exc:  # every waiter of this batch gets the error
                    outputs, error = None, exc
                finally:
                    self._cond.acquire()
                for i, s in enumerate(batch):
                    s.update(done=True, output=None if outputs is None else outputs[i], error=error)
                self.batches += 1
                self.requests += len(batch)
                self._leading = False
                self._cond.notify_all()
        if slot["error"] is not None:
            raise slot["error"]
        return slot["output"]


class _Running:
    def __init__(self, batcher: BatchingEngine):
        self.batcher = batcher

    def __enter__(self) -> None:
        with self.batcher._cond:
            self.batcher.running += 1

    def __exit__(self, *exc: Any) -> None:
        with self.batcher._cond:
            self.batcher.running -= 1
            self.batcher._cond.notify_all()


# -- one episode's chat model --------------------------------------------------------------------
@dataclass
class PolicyChatModel:
    """ChatModel over the live policy for ONE episode; `turns` holds (prompt ids, output ids) per reply."""

    engine: BatchingEngine
    chat: ChatTokens
    name: str = "policy"
    max_new_tokens: int = 4096
    max_seq_len: int = 65536
    temperature: float = 1.0
    seed: int = 0
    turns: list[tuple[list[int], list[int]]] = field(default_factory=list)
    _history: list[tuple[str, str]] = field(default_factory=list)

    def generate(self, messages: list[Message], *, max_tokens: int | None = None,
                 temperature: float | None = None, task: TaskInfo | None = None) -> Completion:
        started = time.perf_counter()
        if not self.turns:
            prompt = self.chat.first_prompt(messages)
        else:
            seen = [(m.role, m.content) for m in messages[: len(self._history)]]
            if seen != self._history:
                raise RuntimeError("the conversation changed between turns; its token ids would no longer match")
            previous_prompt, previous_output = self.turns[-1]
            prompt = previous_prompt + previous_output + self.chat.continuation(
                previous_output, messages[len(self._history):])
        room = self.max_seq_len - len(prompt)
        limit = min(max_tokens or self.max_new_tokens, room)
        if limit < 1:
            raise ModelError("bad_request", f"context full: a prompt of {len(prompt)} tokens leaves no room "
                                            f"under max_seq_len {self.max_seq_len}")
        temp = self.temperature if temperature is None else temperature
        output = self.engine.generate(GenRequest(prompt, limit, temp, (self.seed + 7919 * len(self.turns)) % 2**31))
        text = self.chat.decode(output)
        self.turns.append((prompt, output))
        self._history = [(m.role, m.content) for m in messages] + [("assistant", text)]
        stopped = bool(output) and output[-1] in self.chat.eos_ids
        return Completion(
            text=text, input_tokens=len(prompt), output_tokens=len(output), latency_s=time.perf_counter() - started,
            prompt_token_ids=list(prompt), output_token_ids=list(output),
            extra={"finish_reason": "stop" if stopped else "length"},
        )

    def close(self) -> None:
        """The engine outlives the episode."""
