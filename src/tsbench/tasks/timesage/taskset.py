"""TimeSage-EV as a TaskFamily: where its files are, what a period looks like to a harness, how it is
scored, and the two family hooks the eval layer uses (periods grouped into one chain per scenario
for sequential play; a scorer bound to the run's judge and judge cache)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from tsbench.core import json_input
from tsbench.core.episode import EpisodeTask
from tsbench.core.errors import UserError
from tsbench.core.provenance import read_json, sha256_file
from tsbench.tasks.base import (
    Audit,
    Column,
    EpochStream,
    JudgeModels,
    Sample,
    SampleRef,
    Scored,
    TaskFamily,
    Taxonomy,
    TrainingRequest,
    TrainingStream,
)
from tsbench.tasks.timesage.axes import AXES
from tsbench.tasks.timesage.judge import RULES_JUDGE, ModelJudge
from tsbench.tasks.timesage.judge_cache import Asker, JudgeCache
from tsbench.tasks.timesage.judge_rules import RulesJudge
from tsbench.tasks.timesage.scoring import feedback_text, score_message
from tsbench.tasks.timesage.store import MANIFEST, PERIODS, files_of, read_index, read_periods
from tsbench.tasks.timesage.taxonomy import FAMILY_SHORT, TIERS

DEFAULT_ROOT = "data/timesage"
JUDGE_CACHE = "judge_cache.jsonl"
MODES = ("independent", "sequential")

COLUMNS = tuple(Column(tier, tier.capitalize(), "overall", "TimeSage-EV (overall, 0-1)") for tier in TIERS)


class TimeSage(TaskFamily):
    name = "timesage"
    strata = ("domain",)
    default_harness = "file-agent"
    harnesses = ("file-agent",)
    judged = True
    boards = ("timesage",)  # Table 12, Table 2, Figs. 7, 9, 10 (leaderboard/timesage*.py)

    def resolve(
        self, data: list[str], *, seed: int, split: str, root: str | None, filters: dict[str, Any]
    ) -> list[Path]:
        if data:
            files = [Path(d) / PERIODS if Path(d).is_dir() else Path(d) for d in data]
        else:
            files = [Path(root or DEFAULT_ROOT) / f"seed{seed}" / PERIODS]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise UserError(
                f"dataset file not found: {missing[0]} (create it with: tsbench generate --family timesage "
                f"--seed {seed})"
            )
        return files

    def index(self, files: list[Path], filters: dict[str, Any]) -> pd.DataFrame:
        frames = []
        for path in files:
            try:
                frame = read_index(path)
            except UserError:  # over the input budget: its own line
                raise
            except Exception as exc:  # pyarrow raises several types for a file that is not ours
                raise UserError(
                    f"{path} is not a TimeSage periods.parquet ({type(exc).__name__}: {str(exc)[:120]})"
                ) from None
            frames.append(frame.assign(path=str(path), category=frame["tier"]))
        rows = pd.concat(frames, ignore_index=True)
        return rows.sort_values(["scenario", "period_index"], kind="stable").reset_index(drop=True)

    def load(self, ref: SampleRef) -> Sample:
        frame = read_periods(ref.path)
        if ref.id not in frame.index:
            raise UserError(f"no period {ref.id!r} in {ref.path}")
        row = frame.loc[ref.id]
        meta = json_input.loads(row["meta"], f"period {ref.id}'s meta")
        task = EpisodeTask(
            row_id=ref.id,
            category=row["tier"],
            regime=row["tier"],
            question=row["question"],
            files=files_of(row["files"]),
            meta=meta,
        )
        attributes = {
            "scenario": row["scenario"],
            "period": row["period_label"],
            "period_index": int(row["period_index"]),
        }
        attributes.update({key: row[key] for key in ("domain", "cadence", "tier", "source")})
        return Sample(
            ref=ref,
            task=task,
            gold=json_input.loads(row["gold"], f"period {ref.id}'s gold"),
            columns={"split": "test", "regime": row["tier"], "attributes": attributes},
        )

    def score(self, category: str, gold: Any, message: str) -> Scored:
        """With the offline rules judge (what a run without --judge uses)."""
        return score_message(gold, message, Asker(RulesJudge()))

    def scorer(
        self, options: dict[str, Any], judge_models: JudgeModels | None = None
    ) -> Callable[[str, Any, str], Scored]:
        """score(category, gold, message) bound to the run's judge (options["judge"], a model spec or
        judge/rules) and its cache (judge_cache.jsonl in options["run_dir"]; in memory without one)."""
        spec = options.get("judge") or RULES_JUDGE
        if spec == RULES_JUDGE:
            judge: Any = RulesJudge()
        else:
            if judge_models is None:
                raise UserError(f"judge {spec} is a model, and no model can be built here")
            judge = ModelJudge(spec, judge_models(spec))
        run_dir = options.get("run_dir")
        cache = JudgeCache(Path(run_dir) / JUDGE_CACHE if run_dir else None)

        def score(category: str, gold: Any, message: str) -> Scored:
            return score_message(gold, message, Asker(judge, cache))

        return score

    def feedback(self, sample: Sample, scored: Scored) -> str:
        return feedback_text(sample.gold.get("period_label", sample.ref.id), scored)

    def chains(self, rows: pd.DataFrame, settings: dict[str, Any]) -> list[list[str]] | None:
        """Sequential mode and the skill library play a scenario's selected periods in order, with
        one agent state: one chain per scenario. Independent mode: None (one job per period)."""
        if settings.get("mode", "independent") not in MODES:
            raise UserError(f"--mode must be independent or sequential (got {settings.get('mode')})")
        if settings.get("mode") != "sequential" and not settings.get("skills"):
            return None
        ordered = rows.sort_values(["scenario", "period_index"], kind="stable")
        return [list(group["id"]) for _, group in ordered.groupby("scenario", sort=False)]

    def variant(self, settings: dict[str, Any]) -> str:
        """What besides model and harness tells configurations apart on the leaderboard."""
        parts = [settings.get("mode") or "independent"]
        if settings.get("skills"):
            parts.append("skills")
        parts.append(settings.get("judge") or RULES_JUDGE)
        return ", ".join(parts)

    def taxonomy(self) -> Taxonomy:
        """Tiers, the four axes and the six question families (paper Tables 2 and 12) for its boards."""
        return Taxonomy(tiers=TIERS, axes=AXES, groups=dict(FAMILY_SHORT))

    def columns(self) -> list[Column]:
        return list(COLUMNS)

    def dataset_identity(self, files: list[Path]) -> dict[str, Any]:
        manifest_path = files[0].parent / MANIFEST
        manifest = read_json(manifest_path) if manifest_path.exists() else {}
        recorded = manifest.get("files", {})
        hashes = {f.name: recorded.get(f.name, {}).get("sha256") or sha256_file(f) for f in files}
        basis = json.dumps(manifest.get("config") or hashes, sort_keys=True)
        seed = manifest.get("seed")
        return {
            "family": self.name,
            "seed": seed,
            "split": "test",
            "key": f"{self.name}/seed{seed}/test/{hashlib.sha256(basis.encode()).hexdigest()[:12]}",
            "paths": [str(f) for f in files],
            "file_sha256": hashes,
        }

    def generate(self, options: dict[str, Any], out: Path, progress=None) -> tuple[Path, list[dict]]:
        from tsbench.tasks.timesage.generate import generate_from_options

        return generate_from_options(options, out, progress)

    def default_root(self) -> Path:
        return Path(DEFAULT_ROOT)

    def training_stream(self, request: TrainingRequest) -> TrainingStream:
        """Shuffled epochs over the periods of a set generated for training. A TimeSage set has no
        train split (every seed is a benchmark of its own), so the set must be named: never the
        default location, which is the set runs are evaluated on."""
        if not request.data:
            raise UserError(
                "family timesage has no train split: give --data a TimeSage set generated for training "
                "(another --seed than the set you evaluate on)"
            )
        given = sorted(k for k, v in request.options.items() if v is not None)
        if given:
            raise UserError(
                f"family timesage trains on a fixed set: {', '.join('--' + k for k in given)} do(es) not apply"
            )
        rows = self.index(self.resolve(list(request.data), seed=request.seed, split="test", root=None, filters={}), {})
        if request.categories:
            rows = rows[rows["category"].isin(request.categories)]
        return EpochStream(self, rows.reset_index(drop=True), request)

    def audit(self, folder: Path) -> Audit:
        """Every period instance: no visible row after the cutoff, no target-period release, truth never
        in the jail, schema, rule reproduction, scoring rules their tags allow, tier coverage."""
        from tsbench.tasks.timesage.audit import CHECKS, periods_from_frame
        from tsbench.tasks.timesage.audit import audit as run_audit
        from tsbench.tasks.timesage.store import SCENARIOS, read_scenarios

        folder = folder if folder.is_dir() else folder.parent
        if not (folder / PERIODS).is_file() or not (folder / SCENARIOS).is_file():
            raise UserError(f"{folder} holds no {SCENARIOS} and {PERIODS}")
        scenarios = {s.id: s for s in read_scenarios(folder / SCENARIOS)}
        periods = periods_from_frame(read_periods(folder / PERIODS))
        missing = sorted(set(periods) - set(scenarios))
        if missing:
            raise UserError(f"periods of unknown scenario(s) {missing[:3]} in {folder / PERIODS}")
        report = run_audit((scenarios[sid], periods.get(sid, [])) for sid in scenarios)
        by_check = report.summary()["failures_by_check"]
        return Audit(
            title=f"audit of {folder}: {report.instances} instances, {report.scenarios} scenarios",
            checks=pd.DataFrame({"check": list(CHECKS), "failures": [by_check[c] for c in CHECKS]}),
            failures=[f"{where}: {check}: {detail}" for where, check, detail in report.failures],
            warnings=list(report.warnings),
        )

    def plot(self, files: list[Path], row_id: str, out: Path, predicted: Any = None) -> Path | None:
        raise UserError("family timesage draws no row: a period's task is a folder of files, not one series")

    def describe(self, files: list[Path]) -> list[tuple[str, pd.DataFrame]]:
        tables = []
        for path in files:
            if path.name != PERIODS:
                continue
            index = read_index(path)
            per = index.groupby(["tier", "domain"]).agg(scenarios=("scenario", "nunique"), periods=("id", "size"))
            tables.append((f"{path.name}: scenarios and periods by tier x domain", per.reset_index()))
            cadence = index.groupby(["cadence"]).agg(scenarios=("scenario", "nunique")).reset_index()
            tables.append((f"{path.name}: release cadences", cadence))
        return tables
