"""Experiment tracking for eval: `--report-to tensorboard` and/or `wandb` (offline, never the network).

A reporter sees the running totals after every finished row (scores so far per category, errors,
tokens, cost) and the run's summary (results.json) at the end, and writes them under the run
directory: `<run>/tensorboard/` (event files; `tensorboard --logdir results`) and `<run>/wandb/`
(an offline run; `wandb sync` uploads it if you ever want to). Training reports through TRL's own
`report_to` into the same places (train/tracking.py). The packages are the `[tracking]` extra.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Protocol

from tsbench.core.extras import require
from tsbench.core.tracking import check_targets
from tsbench.results import results_json


class Reporter(Protocol):
    def update(self, progress: Any) -> None: ...  # a RunProgress

    def finish(self, results: dict) -> None: ...  # results.json

    def close(self) -> None: ...


def progress_scalars(progress: Any) -> dict[str, float]:
    """What a tracker plots while the run goes: running means per category and overall, counts."""
    values = {
        "progress/done": progress.done,
        "progress/errors": progress.errors,
        "progress/tokens": progress.input_tokens + progress.output_tokens,
        "progress/cost_usd": progress.cost_usd,
    }
    overall = progress.overall()
    if overall is not None:
        values["progress/score"] = overall[0]
    for category, mean in progress.means().items():
        values[f"progress/score/{category}"] = mean
    return {k: float(v) for k, v in values.items()}


def result_scalars(results: dict) -> dict[str, float]:
    """The final numbers: mean, 95 % interval, n and errors per category and overall."""
    summary = results_json.summary_of(results) or {}
    blocks = [(b["category"], b) for b in summary.get("categories", [])] + [("overall", summary.get("overall") or {})]
    values: dict[str, float] = {}
    for name, block in blocks:
        for key in ("mean", "n", "errors", "valid_rate", "cost_usd"):
            if block.get(key) is not None:
                values[f"results/{name}/{key}"] = float(block[key])
        if block.get("ci95"):
            values[f"results/{name}/ci95_low"], values[f"results/{name}/ci95_high"] = map(float, block["ci95"])
    return values


class TensorBoardReporter:
    """Scalar events written with tensorboard's own event writer (no torch, no TensorFlow)."""

    def __init__(self, run_dir: Path, info: dict):
        require("tensorboard", extra="tracking", what="--report-to tensorboard")
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.logdir = Path(run_dir) / "tensorboard"
        self._writer = EventFileWriter(str(self.logdir), flush_secs=10)
        self._step = 0

    def _write(self, values: dict[str, float], step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        summary = Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
        self._writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))

    def update(self, progress: Any) -> None:
        self._step = progress.done
        self._write(progress_scalars(progress), progress.done)

    def finish(self, results: dict) -> None:
        self._write(result_scalars(results), self._step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class WandbReporter:
    """An offline wandb run under <run>/wandb: nothing leaves the machine."""

    def __init__(self, run_dir: Path, info: dict):
        wandb = require("wandb", extra="tracking", what="--report-to wandb")
        os.environ["WANDB_MODE"] = "offline"
        os.environ.setdefault("WANDB_SILENT", "true")
        self._run = wandb.init(
            project="tsbench",
            name=str(info.get("run_name")),
            dir=str(run_dir),
            mode="offline",
            config={
                "model": info.get("model"),
                "harness": info.get("harness"),
                "dataset": (info.get("dataset") or {}).get("key"),
                **(info.get("config") or {}),
            },
            settings=wandb.Settings(silent=True, disable_git=True, save_code=False, x_disable_stats=True),
        )
        self.dir = Path(self._run.dir).parent

    def update(self, progress: Any) -> None:
        self._run.log(progress_scalars(progress), step=progress.done)

    def finish(self, results: dict) -> None:
        self._run.summary.update(result_scalars(results))

    def close(self) -> None:
        self._run.finish()


class Reporters:
    """Several reporters as one; none when the run reports nowhere."""

    def __init__(self, reporters: list[Reporter]):
        self.reporters = reporters

    def update(self, progress: Any) -> None:
        for reporter in self.reporters:
            reporter.update(progress)

    def finish(self, results: dict) -> None:
        for reporter in self.reporters:
            reporter.finish(results)

    def close(self) -> None:
        for reporter in self.reporters:
            reporter.close()


def open_reporters(targets: list[str] | None, run_dir: Path, info: dict) -> Reporters:
    kinds = {"tensorboard": TensorBoardReporter, "wandb": WandbReporter}
    return Reporters([kinds[t](run_dir, info) for t in check_targets(targets)])
