"""`--model toto/<checkpoint dir>`: the place for Toto-1.0-QA-style checkpoints (Table 1's last two
TSLM rows: a frozen Toto encoder plus a rendered plot into a Qwen3-VL-32B backbone).

Only the checks exist so far: a missing checkpoint is one line. Loading one needs Datadog's own
model code (ARFBench's toto-1.0-qa-experimental) and about 4 x 40 GB of GPU memory, and is not
implemented here yet, which is said in one line too rather than failing inside an episode.
"""

from __future__ import annotations

from pathlib import Path

from tsbench.models.base import ModelUnavailableError

CHECKPOINT_HINT = "Datadog's Toto-1.0-QA-Experimental checkpoint (see the ARFBench repository)"


def build_model(name: str, opts: dict):
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ModelUnavailableError(f"no Toto checkpoint at {path} (a local directory holding {CHECKPOINT_HINT})")
    raise ModelUnavailableError(
        f"{path}: loading Toto-1.0-QA checkpoints is not implemented in tsbench yet (it needs ARFBench's model code); "
        "the paper's Toto rows are quoted with --with-paper"
    )
