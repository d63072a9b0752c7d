"""Which run directory an invocation writes, as inspect users expect.

`--out DIR` is that dir: the same settings resume it, changed ones are refused (unless --overwrite).
Without it the dir is `<log-dir>/<model>__<harness>...` and resuming is the default only while the
settings match: an invocation with changed settings gets `<log-dir>/<UTC time>_<run name>` and says
so (the same changed command again resumes the newest such dir whose settings match); every
invocation under `--new-run` gets a dir of its own (inspect writes one log per eval).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tsbench.core.errors import UserError
from tsbench.eval.config import EvalConfig, result_settings, settings_diff
from tsbench.results import RUN_JSON, load_run


def settings_conflict(out: Path, cfg: EvalConfig, identity: dict) -> list[str]:
    """`name: old → new` for every answer-changing setting (and the dataset) an existing run in `out`
    was made with differently; [] when there is none or nothing differs."""
    if not (out / RUN_JSON).exists():
        return []
    previous = load_run(out)
    changed = settings_diff(previous.get("settings", {}), result_settings(cfg))
    if (was := previous.get("dataset", {}).get("key")) != identity["key"]:
        changed.append(f"dataset: {was!r} → {identity['key']!r}")
    return changed


def stamped(folder: Path, name: str, now: datetime | None = None) -> Path:
    """`<folder>/<UTC time>_<name>`, never an existing dir (a second in the same second gets -2, ...)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H-%M-%S")
    candidate, n = folder / f"{stamp}_{name}", 2
    while candidate.exists():
        candidate, n = folder / f"{stamp}_{name}-{n}", n + 1
    return candidate


def choose_run_dir(cfg: EvalConfig, identity: dict, name: str) -> tuple[Path, str | None]:
    """The run dir and, when it is not the one the command names by default (`name`, eval/config.py's
    run_name), a line saying why."""
    if cfg.out:
        if cfg.new_run:
            raise UserError("--new-run makes a timestamped dir under --log-dir: give it without --out")
        return Path(cfg.out), None
    folder = Path(cfg.log_dir or "results")
    if cfg.new_run:
        return stamped(folder, name), None
    default = folder / name
    if cfg.overwrite or not (changed := settings_conflict(default, cfg, identity)):
        return default, None
    for earlier in sorted(folder.glob(f"????-??-??T??-??-??_{name}"), reverse=True):  # newest first
        if (earlier / RUN_JSON).exists() and not settings_conflict(earlier, cfg, identity):
            return earlier, f"{default} holds a run with other settings ({'; '.join(changed)}): resuming {earlier}"
    out = stamped(folder, name)
    return out, f"{default} holds a run with other settings ({'; '.join(changed)}): this run goes to {out}"
