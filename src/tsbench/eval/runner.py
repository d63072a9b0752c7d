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
from typing import Any

import pandas as pd

from tsbench.core.config import flat
from tsbench.core.errors import UserError
from tsbench.core.own_folder import OWNED_FILE, check_replaceable, record_owned
from tsbench.core.provenance import checked_identity, git_commit, versions, write_json
from tsbench.core.settings import check as check_settings
from tsbench.eval.agents import AgentCache, check_before_building, check_pairing
from tsbench.eval.config import EvalConfig, result_settings, run_name
from tsbench.eval.episode import EpisodeJob
from tsbench.eval.executors import ExecutorOptions, OnInterrupt, executor_class
from tsbench.eval.host_memory import release_freed_memory
from tsbench.eval.preflight import preflight
from tsbench.eval.run_dir import choose_run_dir, settings_conflict
from tsbench.eval.selection import select_rows
from tsbench.eval.task_results import write_results
from tsbench.harness import Harness, HarnessSettings, MemorySettings, memory_for
from tsbench.models.base import Agent
from tsbench.results import RUN_JSON, Journal, consolidate, load_run, load_samples, now_utc
from tsbench.results.journal import read_journal_report
from tsbench.results.lock import LOCK_FILE, RunDirLock
from tsbench.results.store import RUN_GROWING, RUN_KIND, legacy_run_reason
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
    run_dir: str = ""
    resumed: int = 0  # rows already finished in the run dir when this invocation began
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


@dataclass(frozen=True)
class Play:
    """What the run's episodes are played with: the harness, its own settings, the memory around it."""

    harness: Harness
    settings: HarnessSettings
    memory: MemorySettings | None


def _play(cfg: EvalConfig, name: str) -> Play:
    """The harness `name` and its own settings, built once from the run's; every setting that does not apply
    is refused."""
    harness = cfg.choose_harness(name)
    return Play(harness, cfg.harness_config, memory_for(harness, cfg.memory))


def jails_to_pool(cfg: EvalConfig, play: Play, episodes: int) -> int:
    """Jails to pre-start for the run: one per concurrent episode of a kernel harness (`Harness.kernel`,
    a plugin's as a built-in's), never more than the run has episodes; none when unjailed."""
    if not (cfg.jail_pool and play.harness.kernel and not play.settings.unsafe_sandbox):
        return 0
    return min(cfg.concurrency, episodes)


def _open_run_dir(
    cfg: EvalConfig, out: Path, identity: dict, reference: str | None, play: Play, variant: str = ""
) -> dict:
    """Create or reopen the run dir; refuse to mix results of different settings unless --overwrite."""
    settings = result_settings(cfg)
    if (out / RUN_JSON).exists() and not cfg.overwrite:
        if changed := settings_conflict(out, cfg, identity):
            raise UserError(
                f"{out} holds a run made with different settings ({'; '.join(changed)}); "
                "use another --out, --new-run, or --overwrite to discard it"
            )
        created = load_run(out).get("created_at", now_utc())
    else:
        if cfg.overwrite and out.exists():
            check_replaceable(
                out, RUN_KIND, "a run dir", marker=RUN_JSON, ignore=(LOCK_FILE,), legacy=legacy_run_reason
            )
            _empty_run_dir(out)
        created = now_utc()
    out.mkdir(parents=True, exist_ok=True)
    info = {
        "run_name": out.name,
        "family": cfg.family,
        "model": cfg.model,
        "harness": cfg.harness,
        "harness_capabilities": play.harness.capabilities(),
        "depth": play.settings.recursion_depth,
        "reference": reference,
        "unsafe_sandbox": play.settings.unsafe_sandbox,
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
    ours = _ours(out)
    write_json(out / RUN_JSON, info)
    if ours:  # replaceable even if the run dies; a folder that held other files is never listed as ours
        record_owned(out, RUN_KIND, growing=RUN_GROWING, ignore=(LOCK_FILE,))
    else:
        (out / OWNED_FILE).unlink(missing_ok=True)  # an earlier list no longer says all it holds
    return info


def _ours(out: Path) -> bool:
    """Whether everything in the run dir is tsbench's (it may be listed as what tsbench wrote)."""
    try:
        check_replaceable(out, RUN_KIND, "a run dir", marker=RUN_JSON, ignore=(LOCK_FILE,), legacy=legacy_run_reason)
    except UserError:
        return False
    return True


def _jobs(
    cfg: EvalConfig,
    play: Play,
    rows: pd.DataFrame,
    pending: dict[str, list[int]],
    chains: list[list[str]] | None,
    scoring: tuple,
) -> Iterator[EpisodeJob]:
    options = tuple(sorted((k, v) for k, v in cfg.model_options().items() if v is not None))
    if chains is None:  # file order: consecutive jobs share row groups
        plays = [((SampleRef(cfg.family, r.path, r.id),), pending.get(r.id, ())) for r in rows.itertuples(index=False)]
    else:  # the family plays these rows in order with one agent state; a chain with any unfinished row is
        paths = dict(zip(rows["id"], rows["path"]))  # played again whole
        plays = [
            (
                tuple(SampleRef(cfg.family, paths[rid], rid) for rid in chain),
                sorted({e for rid in chain for e in pending.get(rid, ())}),
            )
            for chain in chains
        ]
    for refs, epochs in plays:
        for epoch in epochs:
            yield EpisodeJob(
                refs[0],
                epoch,
                cfg.model,
                cfg.harness,
                play.settings,
                options,
                chain=refs[1:],
                scoring=scoring,
                memory=play.memory,
            )


@dataclass
class Resolved:
    """What the run plays: its family, the agent built from the model spec, the harness and its settings."""

    taskset: Any
    agents: AgentCache
    agent: Agent
    play: Play
    executor_cls: type


@dataclass
class Selection:
    """The rows the run plays, and what identifies them (the settings that pick them, the data's bytes)."""

    files: list[Path]
    rows: pd.DataFrame
    settings: dict
    variant: str
    identity: dict


@dataclass
class OpenRun:
    """The run dir, held by this process, with its run.json, reporters, chains and judge scoring."""

    out: Path
    moved: str | None
    lock: RunDirLock
    info: dict
    chains: list[list[str]] | None
    scoring: tuple
    reporters: Any


def run_eval(
    cfg: EvalConfig,
    progress: RunProgress | None = None,
    on_update: Callable[[RunProgress], None] | None = None,
    on_interrupt: OnInterrupt | None = None,
) -> Path:
    """Evaluate, resuming whatever the run dir already holds; returns the run dir."""
    validate(cfg)
    release_freed_memory()  # the host holds the rows in flight, not what reading them freed (eval/host_memory.py)
    run = resolve(cfg)
    chosen = select(cfg, run.taskset)
    opened = open_run(cfg, run, chosen)
    progress = progress or RunProgress()
    wanted, pending = read_journal(opened, chosen, cfg.epochs, progress)
    if on_update is not None:
        on_update(progress)
    journal = Journal(opened.out)
    executor = None
    try:
        if pending:
            executor = start_executor(cfg, run, pending)
            jobs = _jobs(cfg, run.play, chosen.rows, pending, opened.chains, opened.scoring)
            executor.run(jobs, recorder(journal, progress, opened.reporters, on_update), on_interrupt)
    finally:
        try:
            _close_all(journal.close, executor.close if executor is not None else None, run.agents.close)
            opened.reporters.finish(_finalize(opened.out, opened.info, wanted, run.taskset))
            opened.reporters.close()
        finally:
            opened.lock.release()
    return opened.out


def validate(cfg: EvalConfig) -> None:
    """Declared types and bounds (core/settings.py, also for configs built in Python), a model, trackers."""
    check_settings(cfg)
    if not cfg.model:
        raise UserError("--model is required (or a --config that sets model)")
    if cfg.report_to:  # a run that reports nowhere loads no tracking code
        from tsbench.core.tracking import check_targets

        check_targets(cfg.report_to)
    preflight(cfg)  # eval/preflight.py: outputs writable, servers answer, before any model loads


def resolve(cfg: EvalConfig) -> Resolved:
    """The family, the agent and the harness (the command's, the family's or the agent's), with every check
    that can fail before an episode: pairing, the judge, the family's harnesses, the executor's preflight."""
    taskset = get_taskset(cfg.family)
    agents = AgentCache()
    harness = cfg.harness or taskset.default_harness
    if harness:  # before a vLLM server starts or weights load
        play = _play(cfg, harness)
        check_before_building(cfg.model, play.harness, play.settings)
    agent = agents.get(cfg.model, cfg.model_options())  # fail fast on a bad spec or a missing key
    play = _play(cfg, harness or agent.default_harness())
    check_pairing(agent, play.harness, play.settings)
    if taskset.judged and cfg.judge and not cfg.judge.startswith("judge/"):
        agents.get(cfg.judge, cfg.judge_options())  # the judge's spec, server and key, checked before any episode
    if taskset.harnesses is not None and cfg.harness not in taskset.harnesses:
        raise UserError(f"family {cfg.family} is played by {', '.join(taskset.harnesses)}, not {cfg.harness}")
    executor_cls = executor_class(cfg.executor)
    executor_cls.preflight(play.harness, play.settings.unsafe_sandbox)  # e.g. the jail, where it runs kernels
    if tools_dir := getattr(play.settings, "tools_dir", None):
        from tsbench.harness.tool_specs import load_tools_dir

        load_tools_dir(tools_dir)  # a tool refused (a link out of --tools-dir) is one line, not an error row each
    return Resolved(taskset, agents, agent, play, executor_cls)


def select(cfg: EvalConfig, taskset: Any) -> Selection:
    """The data files and the rows the run plays, and the identity of the bytes read."""
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
    identity = checked_identity(taskset.dataset_identity(files), files, cfg.allow_modified_data)  # bytes read
    return Selection(files, rows, settings, taskset.variant(settings), identity)


def open_run(cfg: EvalConfig, run: Resolved, chosen: Selection) -> OpenRun:
    """The run dir (eval/run_dir.py: resume only while the settings match), locked for this process, with
    its run.json written and its reporters open."""
    out, moved = choose_run_dir(cfg, chosen.identity, run_name(cfg, run.play.settings))
    lock = RunDirLock(out)  # one writer per run dir, held until the run is summarised
    try:
        chains = run.taskset.chains(chosen.rows, chosen.settings)
        if chains is not None and not run.play.harness.chains:
            raise UserError(f"family {cfg.family} plays chains of rows; harness {cfg.harness} cannot play a chain")
        info = _open_run_dir(cfg, out, chosen.identity, run.agent.reference(), run.play, chosen.variant)
        scoring = (
            (
                ("judge", cfg.judge),
                ("judge_options", tuple(sorted(cfg.judge_options().items()))),
                ("judge_max_tokens", cfg.judge_max_tokens),
                ("run_dir", str(out)),
            )
            if run.taskset.judged
            else ()
        )
        reporters: Any = _Silent()
        if cfg.report_to:
            from tsbench.eval.tracking import open_reporters

            reporters = open_reporters(cfg.report_to, out, info)
    except BaseException:
        lock.release()
        raise
    return OpenRun(out, moved, lock, info, chains, scoring, reporters)


class _Silent:
    """The reporters of a run that reports nowhere, so eval/tracking.py stays unloaded."""

    def update(self, progress: Any) -> None: ...

    def finish(self, results: dict) -> None: ...

    def close(self) -> None: ...


def read_journal(
    opened: OpenRun, chosen: Selection, epochs: int, progress: RunProgress
) -> tuple[set, dict[str, list[int]]]:
    """(every (id, epoch) the run wants, the epochs still to play by id) from the journal; progress counts
    what is already finished."""
    keys = [(rid, e) for rid in chosen.rows["id"] for e in range(epochs)]
    journal_read = read_journal_report(opened.out)
    finished = {(r["id"], r["epoch"]) for r in journal_read.records if r["error_type"] is None}
    pending: dict[str, list[int]] = defaultdict(list)
    for rid, epoch in keys:
        if (rid, epoch) not in finished:
            pending[rid].append(epoch)
    progress.total, progress.run_dir = len(keys), str(opened.out)
    progress.resumed = sum(1 for key in keys if key in finished)
    progress.notes.extend([opened.moved] if opened.moved else [])
    opened.info["expected_samples"] = len(keys)  # a killed run still says how many rows it was to have
    write_json(opened.out / RUN_JSON, opened.info)
    if (opened.out / OWNED_FILE).is_file():  # listed as ours when it opened: run.json is still ours
        record_owned(opened.out, RUN_KIND, growing=RUN_GROWING, ignore=(LOCK_FILE,))
    if note := journal_read.note():
        progress.notes.append(note)
    wanted = set(keys)
    for record in journal_read.records:
        if (record["id"], record["epoch"]) in wanted and record["error_type"] is None:
            progress.add(record)
    return wanted, pending


def start_executor(cfg: EvalConfig, run: Resolved, pending: dict[str, list[int]]) -> Any:
    """The executor for the pending episodes, with a jail pool sized to them."""
    forward_env = tuple(name for name in (cfg.api_key_env, cfg.judge_api_key_env) if name)
    episodes = sum(len(epochs) for epochs in pending.values())
    pool = jails_to_pool(cfg, run.play, episodes)
    options = ExecutorOptions(
        cfg.concurrency, run.agents, cfg.ray_address, forward_env, jail_pool=pool, jail_budget=episodes
    )
    return run.executor_cls.from_options(options)


def recorder(
    journal: Journal, progress: RunProgress, reporters: Any, on_update: Callable[[RunProgress], None] | None
) -> Callable[[dict], None]:
    """What the executor calls with each record: journaled first, then counted, tracked and shown."""

    def on_record(record: dict) -> None:
        journal.append(record)
        progress.add(record)
        reporters.update(progress)
        if on_update is not None:
            on_update(progress)

    return on_record


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
    ours = _ours(out)  # before this rewrites the files the list holds
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
    counts = ("expected_samples", "finished_samples", "error_samples", "updated_at")
    results = write_results(out, info, in_selection, taskset, **{k: info[k] for k in counts})
    if ours:
        record_owned(out, RUN_KIND, growing=RUN_GROWING, ignore=(LOCK_FILE,))
    return results
