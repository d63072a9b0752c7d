"""The eval coordinator: select rows, open the run directory, hand jobs to an executor, journal
every record as it arrives, summarise.

Resume is the default: finished (id, epoch) keys in the journal are skipped; error rows are run
again. Records are fsync'd to the journal one by one in this process only, so a crash, Ctrl-C
or kill -9 loses at most the episodes in flight, whatever executor ran them.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd

from tsbench.core.config import flat
from tsbench.core.errors import UserError
from tsbench.core.provenance import git_commit, versions, write_json
from tsbench.core.tracking import check_targets
from tsbench.eval.agents import AgentCache, check_pairing, default_harness, reference_note
from tsbench.eval.config import RESULT_KEYS, EvalConfig, result_settings, run_name
from tsbench.eval.episode import EpisodeJob
from tsbench.eval.executors import OnInterrupt, get_executor
from tsbench.eval.selection import select_rows
from tsbench.eval.tracking import open_reporters
from tsbench.harness import require_jail
from tsbench.results import RESULTS_JSON, RUN_JSON, Journal, consolidate, load_run, load_samples, now_utc
from tsbench.results.journal import read_journal_report
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
        changed = [k for k in RESULT_KEYS if k in old and old.get(k) != settings[k]]
        if previous.get("dataset", {}).get("key") != identity["key"]:
            changed.append("dataset")
        if changed:
            raise UserError(f"{out} holds a run with different settings ({', '.join(changed)}); "
                            "use another --out, or --overwrite to discard it")
        created = previous.get("created_at", now_utc())
    else:
        if cfg.overwrite and out.exists():
            shutil.rmtree(out)
        created = now_utc()
    out.mkdir(parents=True, exist_ok=True)
    info = {
        "run_name": out.name, "family": cfg.family, "model": cfg.model, "harness": cfg.harness,
        "depth": cfg.harness_config.depth, "reference": reference, "unsafe_sandbox": cfg.harness_config.unsafe_sandbox,
        "settings": settings, "config": flat(cfg), "dataset": identity, "complete": False,
        "versions": versions(), "git_commit": git_commit(), "created_at": created, "updated_at": now_utc(),
    }
    if variant:  # what else tells this configuration apart (the family says; see leaderboard/load.py)
        info["variant"] = variant
    write_json(out / RUN_JSON, info)
    return info


def _jobs(cfg: EvalConfig, rows: pd.DataFrame, pending: dict[str, list[int]], chains: list[list[str]] | None,
          scoring: tuple) -> Iterator[EpisodeJob]:
    options = tuple(sorted((k, v) for k, v in cfg.model_options().items() if v is not None))
    if chains is not None:  # the family plays these rows in order with one agent state; a chain with
        paths = dict(zip(rows["id"], rows["path"]))  # any unfinished row is played again whole
        for chain in chains:
            refs = [SampleRef(cfg.family, paths[rid], rid) for rid in chain]
            for epoch in sorted({e for rid in chain for e in pending.get(rid, ())}):
                yield EpisodeJob(refs[0], epoch, cfg.model, cfg.harness, cfg.harness_config, options,
                                 chain=tuple(refs[1:]), scoring=scoring)
        return
    for row in rows.itertuples(index=False):  # file order: consecutive jobs share row groups
        for epoch in pending.get(row.id, ()):
            yield EpisodeJob(SampleRef(cfg.family, row.path, row.id), epoch, cfg.model, cfg.harness,
                             cfg.harness_config, options, scoring=scoring)


def run_eval(cfg: EvalConfig, progress: RunProgress | None = None,
             on_update: Callable[[RunProgress], None] | None = None,
             on_interrupt: OnInterrupt | None = None) -> Path:
    """Evaluate, resuming whatever the run dir already holds; returns the run dir."""
    hc = cfg.harness_config
    if cfg.epochs < 1 or cfg.concurrency < 1 or hc.max_turns < 1 or hc.period_steps < 1 or hc.depth < 0:
        raise UserError("--epochs, --concurrency, --max-turns and --period-steps must be >= 1, --depth >= 0")
    if cfg.fail_on_error < 0 or (cfg.client_timeout_s is not None and cfg.client_timeout_s <= 0):
        raise UserError("--fail-on-error must be >= 0 and --client-timeout > 0")
    if not cfg.model:
        raise UserError("--model is required (or a --config that sets model)")
    check_targets(cfg.report_to)
    taskset = get_taskset(cfg.family)
    agents = AgentCache()
    agent = agents.get(cfg.model, cfg.model_options())  # fail fast on a bad spec or a missing key
    cfg.harness = (cfg.harness or getattr(taskset, "default_harness", None)
                   or (getattr(agent, "harnesses", None) or (default_harness(cfg.model),))[0])
    check_pairing(cfg.model, cfg.harness, agent)
    if cfg.harness not in getattr(taskset, "harnesses", (cfg.harness,)):
        raise UserError(f"family {cfg.family} is played by {', '.join(taskset.harnesses)}, not {cfg.harness}")
    if cfg.executor != "ray":  # Ray workers check their own nodes, where the kernels run
        require_jail(cfg.harness, hc.unsafe_sandbox)
    files = taskset.resolve(cfg.data, seed=cfg.seed, split=cfg.split, root=cfg.data_root, filters=cfg.filters())
    cfg.data = [str(f) for f in files]
    settings = result_settings(cfg)
    rows = select_rows(taskset, files, categories=cfg.categories, sample_ids=cfg.sample_ids, limit=cfg.limit,
                       seed=cfg.seed, filters=cfg.filters(), settings=settings)
    out = Path(cfg.out) if cfg.out else Path("results") / run_name(cfg)
    variant = taskset.variant(settings) if hasattr(taskset, "variant") else ""
    info = _open_run_dir(cfg, out, taskset.dataset_identity(files), reference_note(agent), variant)
    chains = taskset.chains(rows, settings) if hasattr(taskset, "chains") else None
    scoring = (("judge", cfg.judge), ("run_dir", str(out))) if hasattr(taskset, "scorer") else ()
    reporters = open_reporters(cfg.report_to, out, info)

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
            executor = get_executor(cfg.executor, **_executor_options(cfg, agents))
            executor.run(_jobs(cfg, rows, pending, chains, scoring), on_record, on_interrupt)
    finally:
        journal.close()
        if executor is not None:
            executor.close()
        agents.close()
        reporters.finish(_finalize(out, info, wanted, taskset))
        reporters.close()
    return out


def _executor_options(cfg: EvalConfig, agents: AgentCache) -> dict:
    if cfg.executor == "threads":
        return {"concurrency": cfg.concurrency, "agents": agents}
    return {"workers": cfg.concurrency, "address": cfg.ray_address}


def _finalize(out: Path, info: dict, wanted: set, taskset) -> dict:
    """samples.parquet from the journal; run.json says how complete the run is; results.json."""
    consolidate(out)
    samples = load_samples(out)
    mask = [(i, e) in wanted for i, e in zip(samples["id"], samples["epoch"])]
    in_selection = samples.loc[pd.Series(mask, index=samples.index, dtype=bool)]
    finished = int(in_selection["error_type"].isna().sum())
    info.update(expected_samples=len(wanted), finished_samples=finished,
                error_samples=int(in_selection["error_type"].notna().sum()),
                complete=finished == len(wanted), updated_at=now_utc())
    write_json(out / RUN_JSON, info)
    summary = summarize(in_selection, [c.category for c in taskset.columns()])
    results = {
        "run_name": info["run_name"], "family": info["family"], "model": info["model"], "harness": info["harness"],
        "reference": info["reference"], "complete": info["complete"], "dataset": info["dataset"],
        "config": info["config"], "results": summary, "versions": info["versions"], "git_commit": info["git_commit"],
        **{k: info[k] for k in ("expected_samples", "finished_samples", "error_samples", "updated_at")},
    }
    write_json(out / RESULTS_JSON, results)
    return results
