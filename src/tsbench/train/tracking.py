"""`--report-to` for training: TRL's own `report_to`, pointed under the run dir like eval's trackers.

The transformers callbacks read their places from the environment (TensorBoard when the trainer is
built, wandb when training starts): TensorBoard events go to `<run>/tensorboard/`, and wandb writes an
offline run under `<run>/wandb/` (nothing leaves the machine; `wandb sync` uploads it if you want to).
The variables hold for one run only and are restored after it, and the wandb run transformers opened
is finished, so a later eval or training run in the same process writes to its own directory.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tsbench.core.tracking import check_targets


def tracker_env(targets: list[str] | None, run_dir: Path) -> dict[str, str]:
    """The environment the transformers callbacks of these targets read, for this run dir."""
    chosen = check_targets(targets)
    env: dict[str, str] = {}
    if "tensorboard" in chosen:
        env["TENSORBOARD_LOGGING_DIR"] = str(Path(run_dir) / "tensorboard")
    if "wandb" in chosen:
        env.update(WANDB_MODE="offline", WANDB_DIR=str(run_dir))
        env.update(
            {
                k: v
                for k, v in (("WANDB_PROJECT", "tsbench"), ("WANDB_SILENT", "true"), ("WANDB_DISABLE_GIT", "true"))
                if k not in os.environ
            }
        )
    return env


@contextlib.contextmanager
def tracking(targets: list[str] | None, run_dir: Path) -> Iterator[list[str]]:
    """Set the trackers' environment for one training run; yields TRL's `report_to` list."""
    env = tracker_env(targets, run_dir)
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    chosen = check_targets(targets)
    try:
        yield chosen
    finally:
        if "wandb" in chosen:  # transformers leaves its wandb run open; a later run must not log into it
            import wandb

            if wandb.run is not None:
                wandb.finish()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
