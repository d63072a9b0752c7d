"""Re-score a finished run with another judge, from the run's files alone.

Every row's final message and gold are in the journal, and every judge call the run made is in
its judge_cache.jsonl (keyed by the judge and the prompt), so re-scoring with the same judge
makes no call at all, and with a new judge only that judge's calls, which join the cache. The
re-scored run is written to a new run directory (its own settings say which judge scored it).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tsbench.core.errors import UserError
from tsbench.core.own_folder import check_replaceable, record_owned
from tsbench.core.provenance import write_json
from tsbench.eval.agents import AgentCache
from tsbench.eval.episode import judge_completer
from tsbench.eval.task_results import write_results
from tsbench.results import RUN_JSON, Journal, consolidate, load_run, load_samples, now_utc, read_journal
from tsbench.results.lock import LOCK_FILE
from tsbench.results.store import RUN_GROWING, RUN_KIND, legacy_run_reason
from tsbench.tasks import get_taskset

# the metrics a judged family's scorer writes: replaced by the new judge's, every other metric kept
SCORING_PREFIXES = (
    "accuracy",
    "coverage",
    "faithfulness",
    "quality",
    "overall",
    "family_",
    "field:",
    "judge_",
    "claims",
)


@dataclass
class RescoreStats:
    rows: int = 0
    rescored: int = 0
    judge_calls: int = 0
    cache_hits: int = 0
    judge_tokens: int = 0

    @property
    def hit_rate(self) -> float | None:
        return self.cache_hits / self.judge_calls if self.judge_calls else None


def _slug(text: str) -> str:
    return text.replace("/", "_").replace(":", "_")


def rescore_run(
    run_dir: Path,
    judge: str,
    out: Path | None = None,
    judge_options: dict | None = None,
    judge_max_tokens: int | None = None,
) -> tuple[Path, RescoreStats]:
    """`judge_options`: the judge model's provider options (JudgeSettings.judge_options());
    `judge_max_tokens`: the most tokens a judge reply may take."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_JSON).is_file():
        raise UserError(f"{run_dir} is not a run dir (no run.json)")
    info = load_run(run_dir)
    taskset = get_taskset(info.get("family") or "anomalyxl")
    if not taskset.judged:
        raise UserError(f"family {taskset.name} is not scored by a judge; nothing to re-score")
    out = Path(out) if out is not None else run_dir.with_name(f"{run_dir.name}__rescored-{_slug(judge)}")
    if out.resolve() == run_dir.resolve():
        raise UserError("--out must differ from the run being re-scored")
    agents = AgentCache()
    try:
        score = taskset.scorer(
            {"judge": judge, "run_dir": str(run_dir)},
            lambda spec: judge_completer(agents.get(spec, dict(judge_options or {})), judge_max_tokens),
        )
        records = read_journal(run_dir)
        stats = RescoreStats(rows=len(records))
        for record in records:
            if record.get("error_type") is not None or record.get("gold") in (None, "null"):
                continue
            scored = score(record["category"], json.loads(record["gold"]), record.get("final_message") or "")
            kept = {k: v for k, v in (record.get("metrics") or {}).items() if not k.startswith(SCORING_PREFIXES)}
            record.update(
                score=scored.score,
                valid=scored.valid,
                answer_error=scored.error,
                parsed_answer=json.dumps(scored.parsed, ensure_ascii=False, default=str),
                metrics={**kept, **{k: float(v) for k, v in scored.metrics.items() if v is not None}},
            )
            stats.rescored += 1
            stats.judge_calls += int(scored.metrics.get("judge_calls") or 0)
            stats.cache_hits += int(scored.metrics.get("judge_cache_hits") or 0)
            stats.judge_tokens += int(scored.metrics.get("judge_tokens") or 0)
    finally:
        agents.close()
    if out.exists():
        check_replaceable(out, RUN_KIND, "a run dir", marker=RUN_JSON, ignore=(LOCK_FILE,), legacy=legacy_run_reason)
        shutil.rmtree(out)
    out.mkdir(parents=True)
    journal = Journal(out)
    for record in records:
        journal.append(record)
    journal.close()
    consolidate(out)
    for cache in run_dir.glob("judge_cache*.jsonl"):
        shutil.copy(cache, out / cache.name)
    settings = {**info.get("settings", {}), "judge": judge}
    info.update(
        run_name=out.name,
        settings=settings,
        rescored_from=str(run_dir),
        updated_at=now_utc(),
        config={**info.get("config", {}), "judge": judge},
    )
    info["variant"] = taskset.variant(settings)
    write_json(out / RUN_JSON, info)
    write_results(out, info, load_samples(out), taskset, rescored_from=str(run_dir))
    record_owned(out, RUN_KIND, growing=RUN_GROWING)
    return out, stats
