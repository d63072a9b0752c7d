"""The eval coordinator: select rows, open the run directory, hand jobs to an executor, journal
every record as it arrives, summarise.

Resume is the default: finished (id, epoch) keys in the journal are skipped; error rows are run
again. Records are written to the journal one by one in this process only (each through to the OS
before the next; fsync batched), so a crash, Ctrl-C or kill -9 loses at most the episodes in flight,
whatever executor ran them.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tsbench.core.config import flat
from tsbench.core.errors import UserError
from tsbench.core.own_folder import check_replaceable
from tsbench.core.provenance import checked_identity, git_commit, versions, write_json
from tsbench.core.settings import check as check_settings
from tsbench.core.tracking import check_targets
from tsbench.eval.agents import AgentCache, check_combination, check_pairing, default_harness, reference_note
from tsbench.eval.config import EvalConfig, result_settings, run_name, settings_diff
from tsbench.eval.episode import EpisodeJob
from tsbench.eval.executors import ExecutorOptions, OnInterrupt, executor_class
from tsbench.eval.selection import select_rows
from tsbench.eval.task_results import task_results
from tsbench.eval.tracking import open_reporters
from tsbench.harness import KERNEL_HARNESSES
from tsbench.harness.tool_specs import load_tools_dir
from tsbench.results import RESULTS_JSON, RUN_JSON, Journal, consolidate, load_run, load_samples, now_utc
from tsbench.results.journal import read_journal_report
from tsbench.results.lock import LOCK_FILE, RunDirLock
from tsbench.results.summary import summarize
from tsbench.tasks import get_taskset
from tsbench.tasks.base import SampleRef


@dataclass
class RunProgress:
    """Running totals the CLI shows; updated by the coordinator as records arrive."""

    total: int = 0
    done: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    scores: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    notes: list[str] = field(default_factory=list)

    def add(self, record: dict) -> None:
        self.done += 1
        self.input_tokens += record["input_tokens"] or 0
        self.output_tokens += record["output_tokens"] or 0
        self.cost_usd += record["cost_usd"] or 0.0
        if record["error_type"] is not None:
            self.errors += 1
        elif record["score"] is not None:
            self.scores[record["category"]].append(record["score"])

    def means(self) -> dict[str, float]:
        return {c: sum(v) / len(v) for c, v in self.scores.items() if v}

    def overall(self) -> tuple[float, float] | None:
        """Mean and standard error over every scored row so far."""
        values = [s for v in self.scores.values() for s in v]
        if not values:
            return None
        mean = sum(values) / len(values)
        var = sum((s - mean) ** 2 for s in values) / (len(values) - 1) if len(values) > 1 else 0.0
        return mean, (var / len(values)) ** 0.5


def _open_run_dir(cfg: EvalConfig, out: Path, identity: dict, reference: str | None, variant: str = "") -> dict:
    """Create or reopen the run dir; refuse to mix results of different settings unless --overwrite."""
    settings = result_settings(cfg)
    if (out / RUN_JSON).exists() and not cfg.overwrite:
        previous = load_run(out)
        old = previous.get("settings", {})
        changed = settings_diff(old, settings)
        if (was := previous.get("dataset", {}).get("key")) != identity["key"]:
            changed.append(f"dataset: {was!r} → {identity['key']!r}")
        if changed:
            raise UserError(
                f"{out} holds a run made with different settings ({'; '.join(changed)}); "
                "use another --out, or --overwrite to discard it"
            )
        created = previous.get("created_at", now_utc())
    else:
        if cfg.overwrite and out.exists():
            check_replaceable(out, RUN_JSON, "a run dir", ignore=(LOCK_FILE,))
            _empty_run_dir(out)
        created = now_utc()
    out.mkdir(parents=True, exist_ok=True)
    info = {
        "run_name": out.name,
        "family": cfg.family,
        "model": cfg.model,
        "harness": cfg.harness,
        "depth": cfg.harness_config.depth,
        "reference": reference,
        "unsafe_sandbox": cfg.harness_config.unsafe_sandbox,
        "settings": settings,
        "config": flat(cfg),
        "dataset": identity,
        "complete": False,
        "versions": versions(),
        "git_commit": git_commit(),
        "created_at": created,
        "updated_at": now_utc(),
    }
    if variant:  # what else tells this configuration apart (the family says; see leaderboard/load.py)
        info["variant"] = variant
    write_json(out / RUN_JSON, info)
    return info


def _jobs(
    cfg: EvalConfig, rows: pd.DataFrame, pending: dict[str, list[int]], chains: list[list[str]] | None, scoring: tuple
) -> Iterator[EpisodeJob]:
    options = tuple(sorted((k, v) for k, v in cfg.model_options().items() if v is not None))
    if chains is not None:  # the family plays these rows in order with one agent state; a chain with
        paths = dict(zip(rows["id"], rows["path"]))  # any unfinished row is played again whole
        for chain in chains:
            refs = [SampleRef(cfg.family, paths[rid], rid) for rid in chain]
            for epoch in sorted({e for rid in chain for e in pending.get(rid, ())}):
                yield EpisodeJob(
                    refs[0],
                    epoch,
                    cfg.model,
                    cfg.harness,
                    cfg.harness_config,
                    options,
                    chain=tuple(refs[1:]),
                    scoring=scoring,
                )
        return
    for row in rows.itertuples(index=False):  # file order: consecutive jobs share row groups
        for epoch in pending.get(row.id, ()):
            yield EpisodeJob(
                SampleRef(cfg.family, row.path, row.id),
                epoch,
                cfg.model,
                cfg.harness,
                cfg.harness_config,
                options,
                scoring=scoring,
            )


def run_eval(
    cfg: EvalConfig,
    progress: RunProgress | None = None,
    on_update: Callable[[RunProgress], None] | None = None,
    on_interrupt: OnInterrupt | None = None,
) -> Path:
    """Evaluate, resuming whatever the run dir already holds; returns the run dir."""
    hc = cfg.harness_config
    check_settings(cfg)  # declared types and bounds (core/settings.py), also for configs built in Python
    if not cfg.model:
        raise UserError("--model is required (or a --config that sets model)")
    check_targets(cfg.report_to)
    taskset = get_taskset(cfg.family)
    agents = AgentCache()
    if cfg.harness and (foreign := hc.foreign_settings(cfg.harness)):  # before a vLLM server starts, too
        raise UserError("; ".join(foreign))
    check_combination(cfg.model, cfg.harness, hc)  # before a vLLM server starts or weights load
    agent = agents.get(cfg.model, cfg.model_options())  # fail fast on a bad spec or a missing key
    cfg.harness = (
        cfg.harness
        or taskset.default_harness
        or (getattr(agent, "harnesses", None) or (default_harness(cfg.model),))[0]
    )
    check_pairing(cfg.model, cfg.harness, agent, hc)
    if foreign := hc.foreign_settings(cfg.harness):
        raise UserError("; ".join(foreign))
    if taskset.judged and cfg.judge and not cfg.judge.startswith("judge/"):
        agents.get(cfg.judge, cfg.judge_options())  # the judge's spec, server and key, checked before any episode
    if taskset.harnesses is not None and cfg.harness not in taskset.harnesses:
        raise UserError(f"family {cfg.family} is played by {', '.join(taskset.harnesses)}, not {cfg.harness}")
    executor_cls = executor_class(cfg.executor)
    executor_cls.preflight(cfg.harness, hc.unsafe_sandbox)  # e.g. the jail, where this executor runs kernels
    if hc.tools_dir:
        load_tools_dir(hc.tools_dir)  # a tool refused (a link out of --tools-dir) is one line, not an error row each
    files = taskset.resolve(cfg.data, seed=cfg.seed, split=cfg.split, root=cfg.data_root, filters=cfg.filters())
    cfg.data = [str(f) for f in files]
    settings = result_settings(cfg)
    rows = select_rows(
        taskset,
        files,
        categories=cfg.categories,
        sample_ids=cfg.sample_ids,
        limit=cfg.limit,
        limit_per_category=cfg.limit_per_category,
        seed=cfg.seed,
        filters=cfg.filters(),
        settings=settings,
    )
    out = Path(cfg.out) if cfg.out else Path(cfg.log_dir or "results") / run_name(cfg)
    variant = taskset.variant(settings)
    identity = checked_identity(taskset.dataset_identity(files), files, cfg.allow_modified_data)  # bytes read
    lock = RunDirLock(out)  # one writer per run dir, held until the run is summarised
    try:
        info = _open_run_dir(cfg, out, identity, reference_note(agent), variant)
        chains = taskset.chains(rows, settings)
        scoring = (
            (
                ("judge", cfg.judge),
                ("judge_options", tuple(sorted(cfg.judge_options().items()))),
                ("judge_max_tokens", cfg.judge_max_tokens),
                ("run_dir", str(out)),
            )
            if taskset.judged
            else ()
        )
        reporters = open_reporters(cfg.report_to, out, info)
    except BaseException:
        lock.release()
        raise

    keys = [(rid, e) for rid in rows["id"] for e in range(cfg.epochs)]
    journal_read = read_journal_report(out)
    finished = {(r["id"], r["epoch"]) for r in journal_read.records if r["error_type"] is None}
    pending: dict[str, list[int]] = defaultdict(list)
    for rid, epoch in keys:
        if (rid, epoch) not in finished:
            pending[rid].append(epoch)
    progress = progress or RunProgress()
    progress.total = len(keys)
    if note := journal_read.note():
        progress.notes.append(note)
    wanted = set(keys)
    for record in journal_read.records:
        if (record["id"], record["epoch"]) in wanted and record["error_type"] is None:
            progress.add(record)
    if on_update is not None:
        on_update(progress)

    journal = Journal(out)

    def on_record(record: dict) -> None:
        journal.append(record)
        progress.add(record)
        reporters.update(progress)
        if on_update is not None:
            on_update(progress)

    executor = None
    try:
        if pending:
            forward_env = tuple(name for name in (cfg.api_key_env, cfg.judge_api_key_env) if name)
            pooled = cfg.jail_pool and cfg.harness in KERNEL_HARNESSES and not hc.unsafe_sandbox
            episodes = sum(len(epochs) for epochs in pending.values())
            pool = min(cfg.concurrency, episodes) if pooled else 0  # never more jails than episodes
            options = ExecutorOptions(
                cfg.concurrency, agents, cfg.ray_address, forward_env, jail_pool=pool, jail_budget=episodes
            )
            executor = executor_cls.from_options(options)
            executor.run(_jobs(cfg, rows, pending, chains, scoring), on_record, on_interrupt)
    finally:
        try:
            _close_all(journal.close, executor.close if executor is not None else None, agents.close)
            reporters.finish(_finalize(out, info, wanted, taskset))
            reporters.close()
        finally:
            lock.release()
    return out


def _close_all(*closers) -> None:
    """Call every closer even when one fails (a full disk fails the journal's last flush; the
    executor and model clients must still be shut down); the first failure is raised after."""
    failure = None
    for close in closers:
        if close is None:
            continue
        try:
            close()
        except Exception as exc:  # noqa: BLE001 - re-raised below
            failure = failure or exc
    if failure is not None:
        raise failure


def _empty_run_dir(out: Path) -> None:
    """--overwrite: everything in the run dir goes but the lock file this process holds."""
    for child in out.iterdir():
        if child.name == LOCK_FILE:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _finalize(out: Path, info: dict, wanted: set, taskset) -> dict:
    """samples.parquet from the journal; run.json says how complete the run is; results.json."""
    consolidate(out)
    samples = load_samples(out)
    mask = [(i, e) in wanted for i, e in zip(samples["id"], samples["epoch"])]
    in_selection = samples.loc[pd.Series(mask, index=samples.index, dtype=bool)]
    finished = int(in_selection["error_type"].isna().sum())
    info.update(
        expected_samples=len(wanted),
        finished_samples=finished,
        error_samples=int(in_selection["error_type"].notna().sum()),
        complete=finished == len(wanted),
        updated_at=now_utc(),
    )
    write_json(out / RUN_JSON, info)
    summary = summarize(in_selection, [c.category for c in taskset.columns()])
    results = {
        "run_name": info["run_name"],
        "family": info["family"],
        "model": info["model"],
        "harness": info["harness"],
        "reference": info["reference"],
        "complete": info["complete"],
        "dataset": info["dataset"],
        "config": info["config"],
        "results": summary,
        "tasks": task_results(in_selection, info["family"], list(taskset.columns())),
        "versions": info["versions"],
        "git_commit": info["git_commit"],
        **{k: info[k] for k in ("expected_samples", "finished_samples", "error_samples", "updated_at")},
    }
    write_json(out / RESULTS_JSON, results)
    return results
