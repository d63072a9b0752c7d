"""`--model tslm/<run dir>`: a trained TSLM as a model that reads the series natively.

It plays the `series` harness only, which passes the episode's values (channels x L) beside the
messages; the prompt carries one marker per channel and never a value as text. Running out of
memory at a length (a CUDA OOM, a host MemoryError, or an input over `max_input_tokens`) is a
ModelError of kind "oom", recorded as its own error type; the leaderboard prints such a cell as
`OOM*`, as the paper's Table 1 does.
"""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import torch

from tsbench.models.base import Agent, Completion, Message, ModelError, TaskInfo
from tsbench.models.tslm.model import InputTooLong

OOM = "oom"


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class TSLMChatModel(Agent):
    """One TSLM in this process; calls are serialised (one GPU, one model)."""

    plays = ("series",)

    @classmethod
    def reads_series(cls) -> bool:
        return True

    def __init__(
        self,
        run_dir: str,
        *,
        device: str | None = None,
        max_new_tokens: int = 256,
        max_input_tokens: int | None = None,
        name: str = "",
    ):
        self.name = name or f"tslm/{run_dir}"
        self.model = self._load(run_dir, device)
        if max_input_tokens is not None:  # the memory budget of this machine, if not the training one's
            self.model.settings.max_input_tokens = max_input_tokens
        self.max_new_tokens = max_new_tokens
        self._lock = threading.Lock()

    def _load(self, run_dir: str, device: str | None):
        from tsbench.models.tslm.build import load_run

        return load_run(run_dir, device=device)

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
        series: np.ndarray | None = None,
    ) -> Completion:
        if series is None:
            raise ModelError("bad_request", f"{self.name} reads the series natively: play it with --harness series")
        budget = int(max_tokens or self.max_new_tokens)
        prompt = self.model.render_prompt(messages)
        started = time.perf_counter()
        with self._lock:
            try:
                ids, n_input = self.model.generate(prompt, torch.tensor(np.asarray(series, np.float32)), budget)
            except InputTooLong as exc:
                raise ModelError(OOM, f"at L={series.shape[-1]}: {exc}") from None
            except (torch.OutOfMemoryError, MemoryError) as exc:
                free_memory()
                raise ModelError(OOM, f"out of memory at L={series.shape[-1]}: {str(exc)[:200]}") from None
        eos = self.model.tokenizer.eos_token_id
        finished = bool(ids) and ids[-1] == eos
        text = self.model.tokenizer.decode(ids, skip_special_tokens=True).strip()
        return Completion(
            text=text,
            input_tokens=n_input,
            output_tokens=len(ids),
            latency_s=time.perf_counter() - started,
            cost_usd=0.0,
            extra={"finish_reason": "stop" if finished or len(ids) < budget else "length"},
        )

    def close(self) -> None:
        self.model = None
        free_memory()


TSLM_OPTIONS = {"device", "max_new_tokens", "max_input_tokens"}


def build_model(name: str, opts: dict) -> TSLMChatModel:
    """The `tslm` provider: `tslm/<run dir>` (-M device=cuda:1, -M max_new_tokens=128, -M max_input_tokens=N)."""
    from tsbench.core.extras import check
    from tsbench.models.registry import options_for

    check("torch", "transformers", "peft", "chronos", extra="tslm", what="a tslm/ model")
    given = options_for("tslm", TSLM_OPTIONS, opts, ints=("max_new_tokens", "max_input_tokens"))
    return TSLMChatModel(name, name=f"tslm/{name}", **given)
