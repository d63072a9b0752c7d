"""The seam between a benchmark and everything that runs it: the `TaskFamily` base class.

A task family (AnomalyXL, TimeSage-EV, a recording set, a test family) gives data, scoring and
training tasks; harnesses, executors, trainers, the CLI and the leaderboard only ever talk to it
through the hooks declared here (the `verifiers` taskset/harness split). Every hook has its
default below, so callers call it and never probe. A family is added in one place: its own
package (a `TaskFamily` subclass), named in `tasks/__init__.py` or passed as `module:attribute`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tsbench.core.episode import EpisodeTask
from tsbench.core.errors import UserError
from tsbench.core.stats import weighted_capped_mean


@dataclass(frozen=True)
class SampleRef:
    """Where one sample lives: enough for any process that can read `path` to load it."""

    family: str
    path: str
    id: str


@dataclass
class Sample:
    """One row as the coordinator sees it: the harness gets `task`, only the scorer reads `gold`."""

    ref: SampleRef
    task: EpisodeTask
    gold: Any
    # Result columns the family fills in (see results/schema.py): split, subset, length,
    # n_channels, attributes (a str -> str dict of family facts such as a scenario or period).
    columns: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scored:
    """A final message judged: `score` in [0, 1]; `valid` is False when no usable answer was found."""

    score: float
    valid: bool
    parsed: Any = None  # the typed answer the scorer read, JSON-able
    error: str | None = None  # why the answer is unusable
    metrics: dict[str, float | None] = field(default_factory=dict)  # secondary numbers


@dataclass(frozen=True)
class JudgeReply:
    """What a judge model returns to a family scored by a judge (the `scorer(options,
    judge_models)` hook, where `judge_models(spec)` gives a `prompt -> JudgeReply` callable): the reply
    and what it cost, so a run reports its judge's tokens and dollars apart from the agent's."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # None: the judge model has no known price


@dataclass(frozen=True)
class Aggregate:
    """How a column's metric becomes its number when the benchmark's own protocol is not a plain mean
    (CiK: RCRPS weighted by the task weights, each instance capped at 5, an unusable answer counted
    at the cap, lower is better)."""

    weight: str | None = None  # the row attribute holding its weight (None: every row weighs 1)
    cap: float | None = None  # a value above it counts as the cap
    unusable: float | None = None  # what a scored row without the metric (no usable answer) counts as
    lower_is_better: bool = False
    protocol: str = ""  # one line naming the rule, shown beside the numbers
    nan_propagates: bool = False  # a NaN metric makes the number NaN (CiK's code), not an unusable row

    def inputs(self, metrics: Iterable[Any], attributes: Iterable[Any], metric: str) -> tuple[list, list[float]]:
        """(each scored row's metric or None, its weight) from the rows' metrics and attributes
        (dicts, or the (key, value) pairs a parquet map reads back as)."""
        values = [_entry(m, metric) for m in metrics]
        if self.weight is None:
            return values, [1.0] * len(values)
        return values, [float(_entry(a, self.weight) or 1.0) for a in attributes]

    def value(self, values: Sequence[float | None], weights: Sequence[float]) -> float | None:
        """The column's number: the weighted mean of the capped values, unusable rows at `unusable`."""
        return weighted_capped_mean(values, weights, self.cap, self.unusable, self.nan_propagates)

    def filled(self, values: Sequence[float | None]) -> list[float | None]:
        """The values as the mean counts them: capped, an unusable row at `unusable` (None: left out)."""
        out = []
        for value in values:
            if self.nan_propagates and isinstance(value, float) and math.isnan(value):
                out.append(math.nan)
            elif value is None or (isinstance(value, float) and math.isnan(value)):
                out.append(self.unusable)
            else:
                out.append(min(float(value), self.cap) if self.cap is not None else float(value))
        return out


def _entry(mapping: Any, key: str) -> Any:
    if mapping is None:
        return None
    if isinstance(mapping, dict):
        return mapping.get(key)
    try:
        return dict(mapping).get(key)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Column:
    """One column of the family's results table, in display order.

    With `options`, the category is a multiple choice: the table shows accuracy and macro-F1
    over those options; without, one mean score labelled `metric`.
    """

    category: str
    short: str  # the paper's column label
    metric: str  # what the number is ("IoU", "F1", ...)
    group: str  # the header it sits under ("MCQ", "Localize", ...)
    options: tuple[str, ...] | None = None
    # The mean shown is of metrics[mean_metric] over the rows that report it (e.g. IoU over anomalous
    # windows only, as a paper's table has it), not of the row score.
    mean_metric: str | None = None
    aggregate: Aggregate | None = None  # with mean_metric: the benchmark's own aggregation of it


@dataclass(frozen=True)
class Taxonomy:
    """The vocabularies a family's boards group its rows by, declared once by the family (TimeSage: the
    difficulty tiers, the scoring axes, the question families by key and short label)."""

    tiers: tuple[str, ...] = ()
    axes: tuple[str, ...] = ()
    groups: dict[str, str] = field(default_factory=dict)


@dataclass
class Audit:
    """What `tsbench audit` shows of a generated set: each check with its failure count, then every
    failure and warning in one line. A set with any failure is not fit to publish."""

    title: str
    checks: pd.DataFrame  # columns: check, failures
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


ScoreFn = Callable[[str, Any, str], Scored]  # (category, gold, message) -> Scored
JudgeModels = Callable[[str], Callable[[str], JudgeReply]]  # judge model spec -> (prompt -> reply)
TRAIN_SPLIT = "train"


@dataclass(frozen=True)
class TrainingRequest:
    """What a trainer asks of a family's training stream; the family refuses what it cannot honour.

    `options` are generator settings only a generator family reads (AnomalyXL: preset, lengths);
    None means not given, and a fixed set refuses any that is given."""

    seed: int
    steps: int
    tasks_per_step: int
    data: tuple[str, ...] = ()  # dataset files or folders; empty: the family's default location
    categories: tuple[str, ...] | None = None  # None: every category the family trains on
    warm_steps: int = 0  # steps 1..warm_steps are a curriculum's warm phase (no curriculum: ignored)
    options: dict[str, Any] = field(default_factory=dict)


class TrainingStream:
    """A seeded stream of training tasks: `sample(step, j)` is task j of step s (steps count from 1),
    a pure function of the request, so a resumed run draws exactly the tasks it would have drawn."""

    def sample(self, step: int, j: int) -> Sample:
        """Task j of step `step`, gold included (only the scorer reads it)."""
        raise NotImplementedError

    def step_metrics(self, step: int) -> dict[str, float]:
        """Numbers about the stream at a step that the run logs (e.g. a curriculum's settings)."""
        return {}


class EpochStream(TrainingStream):
    """A fixed set's stream: shuffled epochs over its rows, each epoch a new seeded permutation; task
    n of the run (n = (step - 1) x tasks_per_step + j) is row n mod N of epoch n // N."""

    def __init__(self, family: TaskFamily, rows: pd.DataFrame, request: TrainingRequest):
        if rows.empty:
            raise UserError(f"family {family.name} has no training rows in the selected data")
        self.family, self.request = family, request
        self.refs = [SampleRef(family.name, str(p), str(i)) for p, i in zip(rows["path"], rows["id"])]
        self._orders: dict[int, np.ndarray] = {}

    def order(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            digest = hashlib.sha256(f"{self.request.seed}/train-epoch/{epoch}".encode()).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            self._orders[epoch] = rng.permutation(len(self.refs))
        return self._orders[epoch]

    def sample(self, step: int, j: int) -> Sample:
        n = (step - 1) * self.request.tasks_per_step + j
        epoch, position = divmod(n, len(self.refs))
        return self.family.load(self.refs[int(self.order(epoch)[position])])

    def step_metrics(self, step: int) -> dict[str, float]:
        return {"epoch": float((step - 1) * self.request.tasks_per_step // len(self.refs))}


class TaskFamily:
    """Base class of every task family. The six hooks without a default (resolve ... dataset_identity)
    are the family's own; every other hook has a working default a family overrides when it can do
    more. Callers call the hooks; none probes for them."""

    name: str = ""  # the family name, recorded in every run
    strata: tuple[str, ...] = ()  # index columns whose cells --limit draws from evenly, e.g. ("length",)
    default_harness: str | None = None  # the harness a run uses when none is given (None: the model's)
    harnesses: tuple[str, ...] | None = None  # the only harnesses that can play it (None: any)
    judged: bool = False  # scored by a judge model: `scorer` binds the run's judge, `rescore` applies
    # Leaderboard boards (sections, figures, CSVs) beyond the main table that show its runs, by their
    # names in the leaderboard's board registry (tsbench.leaderboard.boards; plugins: `board.<name>`).
    boards: tuple[str, ...] = ()
    # The questions ask for TimeMaster's <think>/<class> tags and `score` reads them in the whole reply
    # (TimerBed): the composite reward appends no format instructions of its own.
    answer_tags: bool = False

    # -- the family's own ------------------------------------------------------------------------
    def resolve(
        self, data: list[str], *, seed: int, split: str, root: str | None, filters: dict[str, Any]
    ) -> list[Path]:
        """The dataset files a run reads (explicit paths, a seed dir, or the default location)."""
        raise NotImplementedError

    def index(self, files: list[Path], filters: dict[str, Any]) -> pd.DataFrame:
        """One light line per row, no series values; filters applied. The CLI and eval read the columns `id`
        (str, unique per file), `category` (str, one of `columns()`' categories), `path` (the file the row
        is in) and `gold` (JSON text: `tsbench score` reads it with json.loads and hands it to `score`), and
        any of `strata` the family names."""
        raise NotImplementedError

    def load(self, ref: SampleRef) -> Sample:
        """The full sample, values included."""
        raise NotImplementedError

    def score(self, category: str, gold: Any, message: str) -> Scored:
        """Judge one final message (`gold` as `index`'s JSON decodes). Pure; never raises on the message:
        an unreadable answer is a Scored with valid=False, score 0 and its `error` saying why. `tsbench
        score` reads score, valid, parsed, error and metrics (a JSON-serialisable dict)."""
        raise NotImplementedError

    def columns(self) -> list[Column]:
        """The results table's columns, in order: one per category `index` gives. `tsbench score` and the
        summaries read `category` and `options` (the class names: a macro-F1 is shown where they are set)."""
        raise NotImplementedError

    def dataset_identity(self, files: list[Path]) -> dict[str, Any]:
        """family, seed, split and content hashes: how runs on the same data are recognised."""
        raise NotImplementedError

    # -- data --------------------------------------------------------------------------------------
    def generate(self, options: dict[str, Any], out: Path, progress=None) -> tuple[Path, list[dict]]:
        """Write the dataset under `out` (`tsbench generate`); returns (the manifest's path, one dict per file
        written). The CLI prints each dict as a table row, so every one holds `file` (its name), `rows`
        (int), `bytes` (int) and `sha256` (hex str), and may hold `note` (a line printed below the table);
        `file_summary` makes one. `options` are the command's flags by name (seed, split, preset, ...: a
        family ignores those it has no use for); `progress(description, total)`, when given, returns an
        `advance(rows)` callable. The same options give the same bytes."""
        raise UserError(f"family {self.name} has no generator")

    def default_root(self) -> Path:
        """Where `generate` writes and `resolve` looks by default (`generate --out`'s default)."""
        return Path("data") / self.name

    def describe(self, files: list[Path]) -> list[tuple[str, pd.DataFrame]]:
        """The tables `tsbench describe` prints, each (a title, a frame printed whole): the CLI reads
        nothing else from them (default: rows per category and stratum, per file)."""
        tables = []
        for path in files:
            rows = self.index([path], {})
            keys = ["category", *[s for s in self.strata if s in rows.columns]]
            counts = rows.groupby(keys, sort=False).size().rename("rows").reset_index()
            tables.append((f"{Path(path).name}: {len(rows)} rows", counts))
        return tables

    def audit(self, folder: Path) -> Audit:
        """Check a generated set's integrity (`tsbench audit`); a family without checks refuses."""
        raise UserError(f"family {self.name} has no audit (tsbench audit checks TimeSage sets)")

    def plot(self, files: list[Path], row_id: str, out: Path, predicted: Any = None) -> Path | None:
        """Draw one row to `out` (`tsbench describe --plot`); None when no row has that id. The default
        draws the series' channels; `predicted` is a run's parsed answer, which only a family can read."""
        rows = self.index(list(files), {})
        hit = rows[rows["id"] == row_id]
        if hit.empty:
            return None
        from tsbench.tasks.series_plot import plot_series

        sample = self.load(SampleRef(self.name, str(hit.iloc[0]["path"]), row_id))
        return plot_series(sample.task, out, title=f"{self.name} {row_id} ({sample.task.category})")

    # -- scoring -----------------------------------------------------------------------------------
    def scorer(self, options: dict[str, Any], judge_models: JudgeModels | None = None) -> ScoreFn:
        """`score` bound to a run's scoring options (judge spec, run dir); only judged families use them."""
        return self.score

    def feedback(self, sample: Sample, scored: Scored) -> str | None:
        """What a chain's next episode is told about this one's score (None: nothing)."""
        return None

    def answer_class(self, category: str, gold: Any, text: str) -> str | None:
        """The class an answer names (TimeMaster's hard reward); None when it names none."""
        raise UserError(f"family {self.name} has no answer classes (the composite reward needs them)")

    def gold_class(self, category: str, gold: Any) -> str:
        """The gold answer's class, compared with `answer_class`."""
        raise UserError(f"family {self.name} has no answer classes (the composite reward needs them)")

    # -- runs --------------------------------------------------------------------------------------
    def chains(self, rows: pd.DataFrame, settings: dict[str, Any]) -> list[list[str]] | None:
        """Row ids played in order with one agent state (None: every row is its own episode)."""
        return None

    def variant(self, settings: dict[str, Any]) -> str:
        """What besides model and harness tells configurations apart on the leaderboard."""
        return ""

    def taxonomy(self) -> Taxonomy:
        """The vocabularies its boards group rows by (default: none)."""
        return Taxonomy()

    # -- learning from runs: TimeClaw's memory and evolve, SFT ------------------------------------
    def split_files(self, data: list[str], split: str) -> list[Path]:
        """The files of `split` beside `data` (dataset files or folders), [] when there are none: where
        evolve finds held-out rows and SFT its train and val rows. Default: `resolve` on the folders."""
        folders = sorted({str(Path(d) if Path(d).is_dir() else Path(d).parent) for d in data})
        try:
            files = self.resolve(folders, seed=0, split=split, root=None, filters={})
        except UserError:
            return []
        return [Path(f) for f in files if Path(f).is_file()]

    def memory_key(self, sample: Sample) -> str:
        """Which series a memory-bank record stands for; rows that share one series (an AnomalyXL MCQ
        row and the precise row it was projected from) share a key. Default: the row id."""
        return sample.ref.id

    def sft_target(self, category: str, gold: Any) -> str:
        """The reply SFT trains a single-pass answer on: a final message the scorer gives full marks
        (default: the gold as JSON; SFT skips a row whose target does not score 1)."""
        return gold if isinstance(gold, str) else json.dumps(gold)

    # -- training ----------------------------------------------------------------------------------
    def training_stream(self, request: TrainingRequest) -> TrainingStream:
        """The seeded stream of training tasks (default: shuffled epochs over the `train` split)."""
        unknown = sorted(k for k, v in request.options.items() if v is not None)
        if unknown:
            raise UserError(
                f"family {self.name} trains on its fixed train split: "
                f"{', '.join('--' + k for k in unknown)} do(es) not apply"
            )
        files = self.resolve(list(request.data), seed=request.seed, split=TRAIN_SPLIT, root=None, filters={})
        rows = self.index(files, {})
        if "split" in rows.columns:
            rows = rows[rows["split"] == TRAIN_SPLIT]
        if request.categories:
            missing = sorted(set(request.categories) - set(rows["category"]))
            if missing:
                raise UserError(f"no training rows of categories {missing} in family {self.name}'s data")
            rows = rows[rows["category"].isin(request.categories)]
        return EpochStream(self, rows.reset_index(drop=True), request)


def row_sample(ref: SampleRef, row: Any, values: np.ndarray | None, *, meta=None, attributes=None) -> Sample:
    """The Sample of a series family's row (id, category, regime, question, channel_names, options,
    gold, split, length); `attributes`: the result column of family facts, when the family has some."""
    names, options = list(row.channel_names), list(row.options)
    task = EpisodeTask(row.id, row.category, row.regime, row.question, names, values, options, meta=dict(meta or {}))
    columns = {"split": row.split, "regime": row.regime, "length": row.length, "n_channels": len(row.channel_names)}
    return Sample(ref, task, row.gold, columns | ({} if attributes is None else {"attributes": attributes}))


def read_indexes(files: list[Path], read: Callable[[Path], pd.DataFrame], what: str) -> pd.DataFrame:
    """The files' indexes (`read(path)`, each with its `path`) as one frame; a file that is not `what`
    is refused in one line (a UserError, e.g. over the input budget, keeps its own)."""
    frames = []
    for path in files:
        try:
            frame = read(path)
        except UserError:
            raise
        except Exception as exc:  # pyarrow raises several types for a file that is not ours
            raise UserError(
                f"{path} is not {what} ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"
            ) from None
        frames.append(frame.assign(path=str(path)))
    return pd.concat(frames, ignore_index=True)


def identity(name: str, seed: Any, split: str, basis: Any, files: list[Path], hashes: dict[str, str]) -> dict[str, Any]:
    """`dataset_identity`'s answer: runs with the same key are on the same data, `basis` (JSON-able)
    being what decides the rows; `hashes` are the files' sha256 by name."""
    digest = hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()[:12]
    return {
        "family": name,
        "seed": seed,
        "split": split,
        "key": f"{name}/seed{seed}/{split}/{digest}",
        "paths": [str(f) for f in files],
        "file_sha256": hashes,
    }


def recorded_hashes(files: list[Path], manifest: dict, split_of: Callable[[Path], str]) -> dict[str, str]:
    """Each file's sha256 as its split's manifest entry records it, else hashed now."""
    from tsbench.core.provenance import sha256_file

    hashes = {}
    for path in files:
        recorded = manifest.get("splits", {}).get(split_of(path), {}).get("files", {}).get(path.name, {})
        hashes[path.name] = recorded.get("sha256") or sha256_file(path)
    return hashes


def file_summary(path: Path, rows: int, note: str | None = None) -> dict[str, Any]:
    """One file's line of `TaskFamily.generate`'s summary, as the CLI prints it."""
    from tsbench.core.provenance import sha256_file

    line: dict[str, Any] = {"file": Path(path).name, "rows": rows, "bytes": Path(path).stat().st_size}
    line["sha256"] = sha256_file(path)
    return line | ({"note": note} if note else {})
