"""Read run directories into one frame of rows, and say what could not be read.

Only files are read (run.json, results.json and the samples journal/parquet through tsbench.results):
the leaderboard must work on results copied from another machine, with no model or harness around.
results.json, when a run has one, gives the run's summary without re-reading its rows
(`read_summary`) and is cross-checked against the rows the tables are built from.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from tsbench.core import json_input
from tsbench.core.data_hash import split_hash
from tsbench.core.sanitize import display_name
from tsbench.core.text import short_model_name
from tsbench.results import COLUMN_NAMES, JOURNAL, RESULTS_JSON, RUN_JSON, SAMPLES, load_run, load_samples, results_json
from tsbench.results.journal import read_journal_report
from tsbench.results.summary import summarize

# A table row is one configuration on one dataset: these columns identify it.
CONFIG_KEY = ["dataset", "model", "harness", "depth"]
UNKNOWN_DATASET = "unknown"
UNJAILED = "[no jail]"  # beside the harness of a run made with --unsafe-sandbox, in every table


@dataclass(frozen=True)
class RunInfo:
    """What run.json says about one run directory (only the parts the leaderboard uses)."""

    path: Path
    run_name: str
    model: str
    harness: str
    depth: int
    dataset: str  # the dataset's identity key (family/seed/split/config hash), or "unknown"
    family: str
    reference: str | None  # what a reference policy knows that a model does not; None for models
    unsafe_sandbox: bool  # kernels ran without the jail
    complete: bool
    expected_samples: int | None
    n_rows: int
    summary: dict | None = None  # results.json's "summary" (per category and overall), when the run has one
    settings: dict = field(default_factory=dict)  # run.json "settings": everything that can change an answer
    data_hash: str = ""  # the split's file hash (core/data_hash.py), printed beside every board on it


def discover_runs(paths: list[Path], skip: Path | None = None) -> tuple[list[Path], list[str]]:
    """Run directories among ``paths``: a path holding run.json is a run; else its children that do.

    ``tsbench leaderboard results/*`` also matches the output folder and stray files; those are
    skipped (the output folder silently, anything else with a note) rather than failing the build.
    """
    runs: list[Path] = []
    notes: list[str] = []
    skip_resolved = skip.resolve() if skip is not None else None
    for path in map(Path, paths):
        if skip_resolved is not None and path.resolve() == skip_resolved:
            continue
        if (path / RUN_JSON).is_file():
            runs.append(path)
            continue
        children = sorted(c for c in path.iterdir() if (c / RUN_JSON).is_file()) if path.is_dir() else []
        if children:
            runs.extend(children)
        else:
            notes.append(f"skipped {path}: no run.json")
    seen: set[Path] = set()
    unique = [r for r in runs if not (r.resolve() in seen or seen.add(r.resolve()))]
    return unique, notes


def read_results_json(run_dir: Path) -> dict | None:
    """results.json, or None when the run has none (runs from before it) or it is unreadable."""
    path = Path(run_dir) / RESULTS_JSON
    try:
        value = json_input.read_json(path)
    except (OSError, ValueError):  # ValueError: malformed, too deep or too big (json_input)
        return None
    return value if results_json.summary_of(value) is not None else None


def file_problems(run_dir: Path) -> list[str]:
    """One line per damaged file of a run that is still read (a results.json that is not ours, journal
    lines that do not parse), naming the run's folder: the tables then rest on what could be read."""
    run_dir = Path(run_dir)
    notes = []
    if (run_dir / RESULTS_JSON).is_file() and read_results_json(run_dir) is None:
        notes.append(f"{run_dir}: {RESULTS_JSON} is unreadable or not a results file; the tables use the samples")
    if (run_dir / JOURNAL).exists() and (note := read_journal_report(run_dir).note()):
        notes.append(f"{run_dir}: {note} of {JOURNAL}")
    return notes


def read_summary(run_dir: Path) -> dict:
    """A run's per-category and overall numbers: results.json's when present (no rows are read),
    else the same summary computed from the rows."""
    saved = read_results_json(run_dir)
    if saved is not None:
        return results_json.summary_of(saved)
    return summarize(load_samples(run_dir))


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def summary_mismatch(info: RunInfo, frame: pd.DataFrame) -> str | None:
    """Why results.json disagrees with the rows (None when it agrees or is absent): rows, errors or mean."""
    if info.summary is None or "overall" not in info.summary:
        return None
    saved = info.summary["overall"]
    errors = int(frame["error_type"].notna().sum())
    scored = frame.loc[frame["error_type"].isna() & frame["score"].notna(), "score"].astype(float)
    mean = float(scored.mean()) if len(scored) else None
    problems = []
    if saved.get("rows") != len(frame):
        problems.append(f"{saved.get('rows')} rows against {len(frame)}")
    if saved.get("errors") != errors:
        problems.append(f"{saved.get('errors')} errors against {errors}")
    if not _close(saved.get("mean"), mean):
        problems.append(f"mean {saved.get('mean')} against {mean}")
    if not problems:
        return None
    return (
        f"run {info.run_name}: results.json disagrees with its samples ({'; '.join(problems)}): "
        "it is rewritten when an eval ends, so a run still going or narrowed by a later --limit differs; "
        "the tables use the samples"
    )


def _first(frame: pd.DataFrame, column: str, default):
    values = frame[column].dropna() if column in frame else pd.Series(dtype=object)
    return values.iloc[0] if len(values) else default


def read_run(run_dir: Path) -> tuple[RunInfo, pd.DataFrame]:
    """One run's rows with its identifying columns filled in from run.json (samples as fallback)."""
    meta = load_run(run_dir)
    has_rows = (run_dir / JOURNAL).exists() or (run_dir / SAMPLES).exists()
    frame = load_samples(run_dir) if has_rows else pd.DataFrame(columns=COLUMN_NAMES)
    identity = meta.get("dataset") or {}
    dataset = identity.get("key") or identity.get("manifest_sha256") or UNKNOWN_DATASET
    info = RunInfo(
        path=run_dir,
        # Names a run dir from anywhere holds are made safe here, once, for every board and figure.
        run_name=display_name(run_dir.name or str(meta.get("run_name"))),  # the folder the user sees
        model=display_name(meta.get("model") or _first(frame, "model", "?")),
        harness=display_name(meta.get("harness") or _first(frame, "harness", "?"))
        + (f" [{display_name(meta['variant'])}]" if meta.get("variant") else "")  # e.g. TimeSage's mode
        + (f" {UNJAILED}" if meta.get("unsafe_sandbox") else ""),  # never merged with, or mistaken for, a jailed run
        depth=int(meta.get("depth") if meta.get("depth") is not None else _first(frame, "depth", 0)),
        dataset=str(dataset),
        family=str(meta.get("family") or "anomalyxl"),
        reference=meta.get("reference"),
        unsafe_sandbox=bool(meta.get("unsafe_sandbox", False)),
        complete=bool(meta.get("complete", False)),
        expected_samples=meta.get("expected_samples"),
        n_rows=len(frame),
        summary=results_json.summary_of(read_results_json(run_dir)),
        settings=meta.get("settings") if isinstance(meta.get("settings"), dict) else {},
        data_hash=split_hash(identity["file_sha256"]) if isinstance(identity.get("file_sha256"), dict) else "",
    )
    frame = frame.assign(
        model=info.model,
        harness=info.harness,
        depth=info.depth,
        dataset=info.dataset,
        family=info.family,
        reference=info.reference,
        run_name=info.run_name,
        run_complete=info.complete,
    )
    return info, frame


# Settings the row key already holds (or that are shown beside the harness anyway).
KEYED_SETTINGS = frozenset({"model", "harness", "depth", "family", "unsafe_sandbox"})


def _setting_text(key: str, value) -> str:
    """`key=value`, short: a URL as host:port/path, a file path as its name."""
    if isinstance(value, str) and "://" in value:
        text = value.split("://", 1)[1].rstrip("/").removesuffix("/v1")
    elif isinstance(value, str) and "/" in value:
        text = Path(value).name
    else:
        text = value if isinstance(value, str) else json.dumps(value)
    return f"{key}={text if len(text) <= 40 else text[:39] + '…'}"


def settings_labels(settings: list[dict]) -> list[str]:
    """For runs of one (dataset, model, harness, depth): what tells each apart, e.g.
    'base_url=127.0.0.1:8001' or 'cell_timeout_s=10.0'; '' for every run when they all agree.
    Only settings every run recorded are compared (older runs recorded fewer)."""
    shared = set.intersection(*(set(s) for s in settings)) - KEYED_SETTINGS if settings else set()
    differing = sorted(k for k in shared if len({json.dumps(s[k], sort_keys=True, default=str) for s in settings}) > 1)
    return [", ".join(_setting_text(k, s[k]) for k in differing) for s in settings]


def _split_by_settings(infos: list[RunInfo], frames: list[pd.DataFrame]) -> tuple[list[RunInfo], list[pd.DataFrame]]:
    """Runs of one model name against different servers or harness settings are different rows:
    each gets the settings that differ beside its harness ("rlm [base_url=host:8001]")."""
    groups: dict[tuple, list[int]] = {}
    for i, info in enumerate(infos):
        groups.setdefault((info.dataset, info.model, info.harness, info.depth), []).append(i)
    infos, frames = list(infos), list(frames)
    for members in groups.values():
        for i, label in zip(members, settings_labels([infos[i].settings for i in members])):
            if label:
                infos[i] = replace(infos[i], harness=f"{infos[i].harness} [{label}]")
                frames[i] = frames[i].assign(harness=infos[i].harness)
    return infos, frames


def _short_names(infos: list[RunInfo], frames: list[pd.DataFrame]) -> tuple[list[RunInfo], list[pd.DataFrame]]:
    """A model a server names by a local path (`openai//root/.cache/.../smollm2-135m`) by its folder's
    name on every board, unless two such models would then read alike."""
    short = {i.model: short_model_name(i.model) for i in infos}
    clash = {s for s in short.values() if len({m for m, t in short.items() if t == s}) > 1}
    infos, frames = list(infos), list(frames)
    for k, info in enumerate(infos):
        if short[info.model] != info.model and short[info.model] not in clash:
            infos[k] = replace(info, model=short[info.model])
            frames[k] = frames[k].assign(model=infos[k].model)
    return infos, frames


def _dedupe(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (config, id, epoch): a scored row beats an error row, then the later one wins."""
    ordered = frame.assign(_scored=frame["score"].notna()).sort_values(
        ["_scored", "finished_at"], na_position="first", kind="stable"
    )
    keep = ordered.drop_duplicates(CONFIG_KEY + ["id", "epoch"], keep="last")
    return keep.drop(columns="_scored").sort_index()


def load_results(run_dirs: list[Path]) -> tuple[pd.DataFrame, list[RunInfo], list[str]]:
    """All rows of all runs, the runs' metadata, and warnings a reader should see.

    Two runs of the same (model, harness, depth) and the same answer-changing settings (run.json
    "settings": server, limits, harness options) on the same dataset (a resumed run written to a
    second folder, say) are merged into one table row; runs that differ in a setting are separate
    rows labelled with it; runs on different datasets (different
    manifest hashes) are never merged or ranked against each other.
    """
    infos: list[RunInfo] = []
    frames: list[pd.DataFrame] = []
    warnings: list[str] = []
    for run_dir in run_dirs:
        try:
            info, frame = read_run(Path(run_dir))
        except (OSError, ValueError) as exc:  # pyarrow's errors for a truncated parquet are both
            warnings.append(f"skipped {run_dir}: {' '.join(str(exc).split())[:200]}")
            continue
        warnings.extend(file_problems(Path(run_dir)))
        infos.append(info)
        frames.append(frame)
        if note := summary_mismatch(info, frame):
            warnings.append(note)
        if info.n_rows == 0:
            warnings.append(f"run {info.run_name} has no finished rows yet")
        if info.unsafe_sandbox:
            warnings.append(f"run {info.run_name} ran its kernels WITHOUT the jail (--unsafe-sandbox)")
        if not info.complete and info.n_rows:
            errors = int(frame["error_type"].notna().sum()) if "error_type" in frame else 0
            warnings.append(
                f"run {info.run_name} is incomplete ({info.n_rows - errors} of {info.expected_samples or '?'} rows "
                f"scored, {errors} error rows); its cells are marked †"
            )
    infos, frames = _split_by_settings(*_short_names(infos, frames))
    datasets = sorted({i.dataset for i in infos})
    if len(datasets) > 1:
        listed = ", ".join(datasets)  # whole keys: family/seed/split/hash, the hash alone tells none apart
        warnings.append(
            f"runs were evaluated on {len(datasets)} different datasets ({listed}); "
            "they are kept in separate tables and never compared"
        )
    by_config: dict[tuple, list[str]] = {}
    for info in infos:
        by_config.setdefault((info.dataset, info.model, info.harness, info.depth), []).append(info.run_name)
    for (_, model, harness, depth), names in by_config.items():
        if len(names) > 1:
            warnings.append(f"{model} / {harness} / depth {depth}: rows of runs {', '.join(names)} merged into one row")
    if not frames:
        return (
            pd.DataFrame(columns=COLUMN_NAMES + ["dataset", "reference", "run_name", "run_complete"]),
            infos,
            warnings,
        )
    rows = pd.concat(frames, ignore_index=True)
    return _dedupe(rows).reset_index(drop=True), infos, warnings
