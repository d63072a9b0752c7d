"""`tsbench generate --family timesage`: build a source's scenarios and periods, audit them, and
write the set only when the audit passes.

Options: seed, source (synthetic | replay | released | snapshot), scenarios, periods, path (the
folder a `released` set, or a snapshot in the authors' layout (sources/snapshot.py), is read from). Files go to <out>/seed<seed>/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.tasks.timesage.audit import audit
from tsbench.tasks.timesage.store import write_set

OPTIONS = ("seed", "source", "scenarios", "periods", "path")
SOURCES = ("synthetic", "replay", "released", "snapshot")
NEEDS_PATH = {
    "released": "--source released needs --path DIR (a folder in the paper's layout; see "
    "tsbench/tasks/timesage/sources/released.py)",
    "snapshot": "--source snapshot needs --path DIR (see tsbench/tasks/timesage/sources/snapshot.py)",
}


def build_sets(options: dict[str, Any], progress=None) -> tuple[list, dict[str, Any]]:
    """[(Scenario, [Period])] and the manifest's config entry for the chosen source."""
    source = options.get("source") or "synthetic"
    seed = int(options.get("seed", 42))
    n_scenarios, n_periods = options.get("scenarios"), options.get("periods")
    for name, value in (("--scenarios", n_scenarios), ("--periods", n_periods)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be at least 1 (got {value})")
    if source == "synthetic":
        from tsbench.tasks.timesage.sources.synthetic import materialize, plan_set

        plans = plan_set(seed, n_scenarios or 60, n_periods or 24)
        advance = progress("timesage synthetic", len(plans)) if progress else None
        sets = []
        for plan in plans:
            sets.append(materialize(plan))
            if advance:
                advance(1)
        config = {"source": source, "seed": seed, "scenarios": len(plans), "periods": n_periods or 24}
        return sets, config
    if source == "replay":
        from tsbench.tasks.timesage.sources.replay import build_replay

        sets = build_replay(n_periods or 24, n_scenarios)
        return sets, {"source": source, "seed": seed, "scenarios": len(sets), "periods": n_periods or 24}
    if source in NEEDS_PATH:
        import tempfile

        from tsbench.tasks.timesage.sources.released import read_released
        from tsbench.tasks.timesage.sources.snapshot import convert_snapshot

        if not options.get("path"):
            raise UserError(NEEDS_PATH[source])
        folder = UserFolder(options["path"], "timesage")
        if source == "released":
            sets = read_released(folder, n_scenarios, n_periods)
        else:  # the authors' layout, converted to the paper's first
            with tempfile.TemporaryDirectory(prefix="tsb-snapshot-") as tmp:
                convert_snapshot(folder, Path(tmp))
                sets = read_released(Path(tmp), n_scenarios, n_periods)
        config = {"source": source, "seed": seed, "path": str(options["path"]), "scenarios": len(sets)}
        return sets, {**config, "sources": folder.hashes()}  # every file read, with its sha256
    raise UserError(f"--source must be one of {', '.join(SOURCES)} (got {source})")


def generate_from_options(options: dict[str, Any], out_root: str | Path, progress=None) -> tuple[Path, list[dict]]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise UserError(f"option(s) {', '.join('--' + u.replace('_', '-') for u in unknown)} do not apply to TimeSage")
    sets, config = build_sets(options, progress)
    report = audit(sets)
    if not report.ok:
        shown = "; ".join(f"{w}: {c}: {d}" for w, c, d in report.failures[:3])
        raise UserError(f"the audit failed on {len(report.failures)} check(s), nothing written: {shown}")
    out = Path(out_root) / f"seed{config['seed']}"
    return write_set(
        sets, out, {"seed": config["seed"], "source": config["source"], "config": config, "audit": report.summary()}
    )
