"""The eval runner: rows x epochs through a harness and a model, scored, journaled crash-safely.

Resume is the default: finished (id, epoch) keys in the journal are skipped; error rows are run
again. Work runs on a bounded thread pool; each finished row is fsync'd to the journal before the
next is taken, so a crash, Ctrl-C or kill -9 loses at most the rows in flight.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import traceback
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from tsbench.anomalyxl.rows import Row, iter_rows
from tsbench.errors import UserError
from tsbench.eval import schema
from tsbench.eval.config import RESULT_KEYS, EvalConfig, run_name
from tsbench.eval.dataset import dataset_fingerprint, resolve_files, select_rows
from tsbench.harness import EpisodeError, EpisodeTask, HarnessConfig, get_harness
from tsbench.harness.sandbox import SandboxError
from tsbench.manifest import git_commit, versions, write_json
from tsbench.models.base import ChatModel, ModelError
from tsbench.scoring import metrics as score_metrics


@dataclass
class RunProgress:
    """Running totals the CLI shows; updated from worker threads under a lock."""

    total: int = 0
    done: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    scores: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def means(self) -> dict[str, float]:
        return {c: sum(v) / len(v) for c, v in self.scores.items() if v}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def prepare_run_dir(cfg: EvalConfig, out: Path, fingerprint: dict, expected: int) -> dict:
    """Create or reopen the run dir; refuse to mix results of different settings unless --overwrite."""
    run_json = out / schema.RUN_JSON
    settings = {k: getattr(cfg, k) for k in RESULT_KEYS}
    if run_json.exists() and not cfg.overwrite:
        previous = json.loads(run_json.read_text())
        old = previous.get("settings", {})
        changed = [k for k in RESULT_KEYS if old.get(k) != settings[k]]
        if previous.get("dataset", {}).get("manifest_sha256") != fingerprint["manifest_sha256"]:
            changed.append("dataset contents")
        if changed:
            raise UserError(
                f"{out} holds a run with different settings ({', '.join(changed)}); "
                "use another --out, or --overwrite to discard it"
            )
        created = previous.get("created_at", _now())
    else:
        if cfg.overwrite and out.exists():
            shutil.rmtree(out)
        created = _now()
    out.mkdir(parents=True, exist_ok=True)
    info = {
        "run_name": out.name, "model": cfg.model, "harness": cfg.harness, "depth": cfg.depth,
        "settings": settings, "config": cfg.to_dict(), "dataset": fingerprint, "expected_samples": expected,
        "complete": False, "versions": versions(), "git_commit": git_commit(), "created_at": created, "updated_at": _now(),
    }
    write_json(run_json, info)
    return info


def record_for(row: Row, epoch: int, cfg: EvalConfig) -> dict:
    """The columns every result row has, before the episode fills in the rest."""
    return {
        "id": row.id, "epoch": epoch, "split": row.split, "regime": row.regime, "category": row.category,
        "length": row.length, "n_channels": len(row.channel_names), "model": cfg.model, "harness": cfg.harness,
        "depth": cfg.depth, "final_message": None, "parsed_answer": None, "gold": json.dumps(row.gold, sort_keys=True),
        "score": None, "valid": False, "metrics": None, "turns": 0, "code_cells": 0, "sub_calls": 0,
        "forced_final": False, "input_tokens": 0, "output_tokens": 0, "sub_call_tokens": 0, "latency_s": 0.0,
        "cost_usd": None, "error_type": None, "error": None, "transcript": "[]", "finished_at": None,
    }


def run_episode(model: ChatModel, harness, hcfg: HarnessConfig, row: Row, epoch: int, cfg: EvalConfig) -> dict:
    """One (row, epoch): never raises for model, sandbox or episode failures; they become error rows."""
    record = record_for(row, epoch, cfg)
    task = EpisodeTask(row.id, row.category, row.regime, row.question, row.channel_names, row.values, row.options)
    started = time.perf_counter()
    result = None
    try:
        result = harness(model, task, hcfg)
    except ModelError as exc:
        record.update(error_type=exc.kind, error=str(exc)[:2000])
    except EpisodeError as exc:
        result = exc.result
        record.update(error_type=exc.kind, error=str(exc)[:2000])
    except SandboxError as exc:
        record.update(error_type="sandbox", error=str(exc)[:2000])
    except Exception as exc:  # a bug must not kill a long run; it is recorded with its traceback
        record.update(error_type="internal", error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")
    if result is not None:
        record.update(
            final_message=result.final_message, turns=result.turns, code_cells=result.code_cells,
            sub_calls=result.sub_calls, sub_call_tokens=result.sub_call_tokens, forced_final=result.forced_final,
            input_tokens=result.input_tokens, output_tokens=result.output_tokens, cost_usd=result.cost_usd,
            transcript=json.dumps(result.transcript, ensure_ascii=False),
        )
    if record["error_type"] is None:
        scored = score_metrics(row.category, row.gold, result.final_message)
        record.update(
            score=scored["score"], valid=bool(scored["valid"]),
            parsed_answer=None if scored["parsed"] is None else json.dumps(scored["parsed"], ensure_ascii=False),
            metrics=json.dumps({k: v for k, v in scored.items() if k not in ("score", "parsed")}, ensure_ascii=False),
        )
    record["latency_s"] = time.perf_counter() - started
    record["finished_at"] = _now()
    return record


def run_eval(
    cfg: EvalConfig,
    model_factory: Callable[[EvalConfig], ChatModel],
    progress: RunProgress | None = None,
    on_update: Callable[[RunProgress], None] | None = None,
) -> Path:
    """Evaluate, resuming whatever the run dir already holds; returns the run dir."""
    if cfg.epochs < 1 or cfg.concurrency < 1 or cfg.max_turns < 1 or cfg.depth < 0:
        raise UserError("--epochs, --concurrency and --max-turns must be >= 1, --depth >= 0")
    harness = get_harness(cfg.harness)
    files = resolve_files(cfg)
    cfg.data = [str(f) for f in files]
    rows = select_rows(cfg, files)
    out = Path(cfg.out) if cfg.out else Path("results") / run_name(cfg)
    keys = [(rid, e) for rid in rows["id"] for e in range(cfg.epochs)]
    prepare_run_dir(cfg, out, dataset_fingerprint(files), len(keys))

    finished = {schema.key_of(r) for r in schema.read_journal(out) if r["error_type"] is None}
    pending = defaultdict(list)
    for rid, epoch in keys:
        if (rid, epoch) not in finished:
            pending[rid].append(epoch)
    progress = progress or RunProgress()
    progress.total = len(keys)
    progress.done = len(keys) - sum(len(v) for v in pending.values())
    for r in schema.read_journal(out):
        if r["error_type"] is None and r["score"] is not None:
            progress.scores[r["category"]].append(r["score"])
    hcfg = HarnessConfig(
        max_turns=cfg.max_turns, depth=cfg.depth, cell_timeout_s=cfg.cell_timeout_s,
        memory_bytes=int(cfg.memory_gib * 2**30), max_tokens=cfg.max_tokens, temperature=cfg.temperature,
        episode_token_cap=cfg.episode_token_cap, episode_wall_s=cfg.episode_wall_s, text_budget_chars=cfg.text_budget_chars,
        tools_dir=cfg.tools_dir, tool_protocol=cfg.tool_protocol, memory_bank=cfg.memory_bank, top_k=cfg.top_k,
    )

    journal = schema.Journal(out)
    model = model_factory(cfg) if pending else None
    try:
        if pending:
            _run_pending(model, harness, hcfg, cfg, rows, pending, journal, progress, on_update)
    finally:
        journal.close()
        if model is not None:
            model.close()
        schema.consolidate(out)
        done = {schema.key_of(r) for r in schema.read_journal(out) if r["error_type"] is None}
        info = json.loads((out / schema.RUN_JSON).read_text())
        info.update(complete=done >= set(keys), finished_samples=len(done & set(keys)), updated_at=_now())
        write_json(out / schema.RUN_JSON, info)
    return out


def _run_pending(model, harness, hcfg, cfg, rows, pending, journal, progress, on_update) -> None:
    def finish(record: dict) -> None:
        journal.append(record)
        with progress.lock:
            progress.done += 1
            progress.input_tokens += record["input_tokens"]
            progress.output_tokens += record["output_tokens"]
            if record["error_type"] is not None:
                progress.errors += 1
            elif record["score"] is not None:
                progress.scores[record["category"]].append(record["score"])
        if on_update is not None:
            on_update(progress)

    in_flight = set()
    with ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="episode") as pool:
        try:
            for path, group in rows.groupby("file", sort=False):
                wanted = {rid for rid in group["id"] if rid in pending}
                if not wanted:
                    continue
                for row in iter_rows(path, ids=wanted):
                    for epoch in pending[row.id]:
                        while len(in_flight) >= 2 * cfg.concurrency:  # bounded: rows in memory stay few
                            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                            for fut in done:
                                in_flight.discard(fut)
                                finish(fut.result())
                        in_flight.add(pool.submit(run_episode, model, harness, hcfg, row, epoch, cfg))
            for fut in list(in_flight):
                finish(fut.result())
                in_flight.discard(fut)
        except BaseException:
            # Ctrl-C (or a failure of our own): drop what has not started, keep what finishes.
            started = [fut for fut in in_flight if not fut.cancel()]
            for fut in started:
                try:
                    finish(fut.result())
                except BaseException:
                    pass
            raise
