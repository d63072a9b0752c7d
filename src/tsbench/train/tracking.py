"""`--report-to` for training: TRL's own `report_to`, pointed under the run dir like eval's trackers.

The transformers callbacks read their places from the environment when the trainer is built:
TensorBoard events go to `<run>/tensorboard/`, and wandb writes an offline run under `<run>/wandb/`
(nothing leaves the machine; `wandb sync` uploads it if you want to).
"""

from __future__ import annotations

import os
from pathlib import Path

from tsbench.core.tracking import check_targets


def trainer_report_to(targets: list[str] | None, run_dir: Path) -> list[str]:
    """TRL's `report_to` for these targets, with each tracker's directory set under `run_dir`."""
    chosen = check_targets(targets)
    if "tensorboard" in chosen:
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(Path(run_dir) / "tensorboard")
    if "wandb" in chosen:
        os.environ["WANDB_MODE"] = "offline"
        os.environ["WANDB_DIR"] = str(run_dir)
        os.environ.setdefault("WANDB_PROJECT", "tsbench")
        os.environ.setdefault("WANDB_SILENT", "true")
        os.environ.setdefault("WANDB_DISABLE_GIT", "true")
    return chosen
