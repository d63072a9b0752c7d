"""The paper's classical baseline (Appendix B, Table 4): features + gradient-boosted heads.

One XGBoost head (or a small set: presence + span, kind + span, direction + lag) per category and
regime, fitted on the train and validation splits; precise and coarse heads are independent, only
the deterministic feature extractor is shared. Head outputs are decoded deterministically into
valid answers: an option string for MCQ rows, the schema's JSON for precise rows.

Layout of a trained model directory:

    <out>/meta.json                  classes, feature version, training summary
    <out>/heads/<regime>/<head>.json one XGBoost model per head (or a constant in meta.json)
    <out>/features/part-*.parquet    per-row feature cache, keyed by a hash of the row's plan

The cache key is the plan (which fixes every value of the row) without the MCQ projection, so a
coarse row reuses its precise source's features and re-fitting the heads never re-reads a series.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tsbench.baselines import decode
from tsbench.baselines import features as F
from tsbench.baselines.feature_cache import (
    RowFeatures,
    extract_features,
    signal_key,
)
from tsbench.core.errors import UserError
from tsbench.core.extras import check
from tsbench.tasks.anomalyxl import labels as lb

# Imported lazily where used; checked up front so a missing one is one line, not a failed episode.
CLASSICAL_PACKAGES = ("xgboost", "stumpy", "ruptures")

Progress = Callable[[str, int, int], None]  # (what, done, total)

SPLITS = ("train", "val")
REGIMES = ("precise", "coarse")
# Small trees, slow learning rate, one thread: the same data and seed give the same heads.
XGB_PARAMS = dict(
    max_depth=4,
    eta=0.05,
    subsample=0.9,
    colsample_bytree=0.9,
    min_child_weight=1.0,
    tree_method="hist",
    nthread=1,
)
N_ROUNDS = 300
FALLBACK_WIDTH = 64  # samples: the window given to a flagged channel that has no |z| > 4 run
CORE_Z, EDGE_Z = 4.0, 2.0  # localize_all_channels: the longest |z| > 4 run, widened while |z| > 2

# ---------------------------------------------------------------------------------------------
# Training tables: one (X, y) per head, from the light columns of the data files
# ---------------------------------------------------------------------------------------------


@dataclass
class Example:
    """One question: its category, length, channels, options, gold, and features."""

    category: str
    length: int
    channel_names: list[str]
    options: list[str]
    gold: dict
    feats: RowFeatures


# The columns a training example needs: the question text and the values are never read here.
EXAMPLE_COLUMNS = ["id", "category", "length", "channel_names", "options", "gold", "plan"]


def iter_examples(
    paths: Iterable[Path], cache: dict[str, RowFeatures], ids: dict[Path, set[str]] | None = None
) -> Iterator[Example]:
    """The examples of `paths`, one at a time: a file's small columns are read (never its values), and
    each example refers to its row's cached features, so nothing grows with the rows but the features."""
    from tsbench.tasks import series_file

    for path in paths:
        index = series_file.read_index(path, EXAMPLE_COLUMNS)
        allowed = None if ids is None else ids.get(Path(path), set())
        for rec in index.itertuples(index=False):
            if allowed is not None and rec.id not in allowed:
                continue
            key = signal_key(json.loads(rec.plan))
            yield Example(
                rec.category,
                int(rec.length),
                list(rec.channel_names),
                list(rec.options),
                json.loads(rec.gold),
                cache[key],
            )
        del index


def channel_rows(ex: Example, names: list[str]) -> np.ndarray:
    """Per-channel head inputs: the channel's 25 features followed by the question's 56."""
    q = ex.feats.question()
    return np.stack([np.concatenate([ex.feats.matrix[ex.channel_names.index(n)], q]) for n in names])


def _frac(value: float, length: int) -> float:
    return float(value) / float(length)


def head_tables(examples: Iterable[Example]) -> dict[tuple[str, str], tuple[str, np.ndarray, list]]:
    """{(regime, head): (kind, X, y)} where kind is "clf" (labels) or "reg" (numbers), from examples
    taken one at a time. X is float32: XGBoost reads its inputs as float32, so the heads are the same
    as from float64 and the tables half the size."""
    tables: dict[tuple[str, str], tuple[str, list, list]] = {}

    def add(regime: str, head: str, kind: str, x: np.ndarray, y) -> None:
        entry = tables.setdefault((regime, head), (kind, [], []))
        entry[1].append(np.asarray(x, dtype=np.float32))
        entry[2].append(y)

    for ex in examples:
        c, L, g = ex.category, ex.length, ex.gold
        if c == lb.ALL_CHANNELS:
            gold_channels = {ev["channel"] for ev in g["anomalies"]}
            for name, x in zip(ex.channel_names, channel_rows(ex, ex.channel_names)):
                add("precise", "all_channels.channel", "clf", x, name in gold_channels)
            continue
        if c == lb.IDENTIFICATION:
            asked = decode.named_channels(ex.options)
            chosen = set() if g["answer"] == lb.IDENTIFICATION_NONE else {p.strip() for p in g["answer"].split(",")}
            for name, x in zip(asked, channel_rows(ex, asked)):
                add("coarse", "identification.channel", "clf", x, name in chosen)
            continue
        q = ex.feats.question()
        if c == lb.LOCALIZE:
            add("precise", "localize.present", "clf", q, bool(g["present"]))
            if g["present"]:
                add("precise", "localize.start", "reg", q, _frac(g["start"], L))
                add("precise", "localize.end", "reg", q, _frac(g["end"], L))
        elif c == lb.CLASSIFY:
            add("precise", "classify.kind", "clf", q, g["kind"])
            if g["kind"] != lb.NO_ANOMALY_KIND:
                add("precise", "classify.start", "reg", q, _frac(g["start"], L))
                add("precise", "classify.end", "reg", q, _frac(g["end"], L))
        elif c == lb.MAGNITUDE:
            add("precise", "magnitude.log1p", "reg", q, math.log1p(g["magnitude_sigma"]))
        elif c == lb.LEAD_LAG:
            add("precise", "lead_lag.direction", "clf", q, g["direction"])
            if g["direction"] != "independent":
                add("precise", "lead_lag.lag", "reg", q, _frac(g["lag_samples"], L))
        elif c in lb.MCQ_CATEGORIES:
            add("coarse", c, "clf", q, g["answer"])
    return {k: (kind, np.stack(xs), ys) for k, (kind, xs, ys) in tables.items()}


# ---------------------------------------------------------------------------------------------
# Heads
# ---------------------------------------------------------------------------------------------


class Head:
    """One fitted head: an XGBoost booster, or a constant when the data leave nothing to learn.

    Uses xgboost's native learning API (DMatrix + train), which needs no scikit-learn. A classifier
    is `multi:softprob` over the class list kept in meta.json, so two classes and six are alike.
    """

    def __init__(self, kind: str, classes: list | None = None, model=None, constant=None):
        self.kind = kind
        self.classes = classes
        self.model = model
        self.constant = constant

    @classmethod
    def fit(cls, kind: str, x: np.ndarray, y: list, seed: int) -> Head:
        import xgboost as xgb

        params = {**XGB_PARAMS, "seed": seed}
        if kind == "clf":
            # Booleans and strings alike become class indices; JSON keeps the label list.
            classes = sorted({_label(v) for v in y}, key=str)
            if len(classes) < 2:
                return cls(kind, classes, constant=classes[0])
            index = {c: i for i, c in enumerate(classes)}
            target = np.array([index[_label(v)] for v in y], dtype=np.float64)
            params.update(objective="multi:softprob", num_class=len(classes), eval_metric="mlogloss")
            booster = xgb.train(params, xgb.DMatrix(x, label=target), num_boost_round=N_ROUNDS)
            return cls(kind, classes, booster)
        target = np.asarray(y, dtype=np.float64)
        if len(target) < 2 or float(np.ptp(target)) == 0.0:
            return cls(kind, constant=float(target.mean()) if len(target) else 0.0)
        params.update(objective="reg:squarederror")
        booster = xgb.train(params, xgb.DMatrix(x, label=target), num_boost_round=N_ROUNDS)
        return cls(kind, model=booster)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        import xgboost as xgb

        return np.asarray(self.model.predict(xgb.DMatrix(np.atleast_2d(x))), dtype=np.float64)

    def proba(self, x: np.ndarray) -> list[dict]:
        """Per input row, {class label: probability}."""
        x = np.atleast_2d(x)
        if self.model is None:
            return [{self.constant: 1.0} for _ in range(len(x))]
        p = self._predict(x).reshape(len(x), len(self.classes))
        return [dict(zip(self.classes, map(float, row))) for row in p]

    def value(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(x)
        if self.model is None:
            return np.full(len(x), self.constant, dtype=np.float64)
        return self._predict(x).reshape(len(x))

    def describe(self) -> dict:
        return {"kind": self.kind, "classes": self.classes, "constant": self.constant, "fitted": self.model is not None}


def _label(v):
    """Class labels as JSON-stable values: bools stay bools, everything else a string."""
    return v if isinstance(v, bool) else str(v)


def _head_file(root: Path, regime: str, head: str) -> Path:
    return root / "heads" / regime / f"{head}.json"


def fit_heads(
    examples: Iterable[Example], seed: int = 42, progress: Progress | None = None
) -> dict[tuple[str, str], Head]:
    return fit_tables(head_tables(examples), seed=seed, progress=progress)


def fit_tables(tables: dict, seed: int = 42, progress: Progress | None = None) -> dict[tuple[str, str], Head]:
    heads = {}
    for i, (key, (kind, x, y)) in enumerate(sorted(tables.items())):
        heads[key] = Head.fit(kind, x, y, seed)
        if progress:
            progress("heads", i + 1, len(tables))
    return heads


def save_heads(root: Path, heads: dict[tuple[str, str], Head], extra: dict) -> None:
    meta = {"feature_version": F.FEATURE_VERSION, "heads": {}, **extra}
    for (regime, name), head in heads.items():
        path = _head_file(root, regime, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        if head.model is not None:
            head.model.save_model(path)
        elif path.exists():
            path.unlink()
        meta["heads"][f"{regime}/{name}"] = head.describe()
    (root / "meta.json").write_text(json.dumps(meta, indent=2, default=str))


def load_heads(root: Path) -> tuple[dict[tuple[str, str], Head], dict]:
    import xgboost as xgb

    root = Path(root)
    meta_path = root / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(
            f"no trained classical baseline at {root} (meta.json missing); run `tsbench sft-baseline --model classical`"
        )
    meta = json.loads(meta_path.read_text())
    if meta.get("feature_version") != F.FEATURE_VERSION:
        raise ValueError(
            f"{root} was trained on feature version {meta.get('feature_version')}, this code computes {F.FEATURE_VERSION}; retrain"
        )
    heads = {}
    for full, info in meta["heads"].items():
        regime, name = full.split("/", 1)
        model = None
        if info["fitted"]:
            model = xgb.Booster()
            model.load_model(_head_file(root, regime, name))
        heads[(regime, name)] = Head(info["kind"], info["classes"], model, info["constant"])
    return heads, meta


# ---------------------------------------------------------------------------------------------
# Decoding: head outputs -> answers
# ---------------------------------------------------------------------------------------------


def _raw_index(frac: float, length: int) -> float:
    """A position fraction of the decimated series -> raw sample index, through the stride."""
    stride = max(1, math.ceil(length / F.MAX_POINTS))
    n = math.ceil(length / stride)
    return round(min(max(frac, 0.0), 1.0) * n) * stride


def widened_run(channel: np.ndarray, core: float = CORE_Z, edge: float = EDGE_Z) -> tuple[int, int] | None:
    """Raw (start, end) of a channel's longest |z| > core run on the decimated series, widened on both
    sides while |z| > edge (None when no point passes `core`).

    Appendix B reads localize-all-channels intervals "off the longest positive run" without naming
    the threshold; the |z| > 4 run alone is the peak of an event (median 17 decimated samples against
    a gold median of 163), so the run is grown to the event's flanks, as a hysteresis threshold does.
    """
    x, stride = F.decimate(np.asarray(channel, dtype=np.float64))
    if not len(x):
        return None
    z = np.abs(F.robust_z(x))
    starts, ends = F.runs(z > core)
    if not len(starts):
        return None
    longest = int(np.argmax(ends - starts))
    flank_starts, flank_ends = F.runs(z > edge)  # the |z| > edge run that holds the core
    i = int(np.searchsorted(flank_starts, starts[longest], side="right")) - 1
    return int(flank_starts[i]) * stride, min(int(flank_ends[i]) * stride, len(channel))


class ClassicalPredictor:
    """Answers any AnomalyXL question from its features with the fitted heads."""

    def __init__(self, heads: dict[tuple[str, str], Head]):
        self.heads = heads

    def _head(self, regime: str, name: str) -> Head:
        try:
            return self.heads[(regime, name)]
        except KeyError:
            raise LookupError(
                f"this classical model has no {regime} head {name!r} (its training data lacked the category)"
            ) from None

    def _span(self, prefix: str, q: np.ndarray, length: int) -> tuple[float, float]:
        s = float(self._head("precise", f"{prefix}.start").value(q)[0])
        e = float(self._head("precise", f"{prefix}.end").value(q)[0])
        s, e = min(max(s, 0.0), 1.0) * length, min(max(e, 0.0), 1.0) * length
        if e <= s:  # the two regressors disagree: keep the start, give a typical width
            e = s + FALLBACK_WIDTH
        return s, e

    def answer(
        self,
        category: str,
        length: int,
        channel_names: list[str],
        options: list[str],
        feats: RowFeatures,
        values: list[np.ndarray] | None = None,
    ) -> dict:
        """The decoded answer object (precise schema, or {"answer": option}). With the row's `values`,
        localize-all-channels windows are widened (`widened_run`); without, the |z| > 4 run as stored."""
        ex = Example(category, length, channel_names, options, {}, feats)
        q = feats.question()
        c, L = category, length
        if c == lb.LOCALIZE:
            present = self._head("precise", "localize.present").proba(q)[0].get(True, 0.0) >= 0.5
            s, e = self._span("localize", q, L) if present else (0.0, 0.0)
            return decode.localize_answer(present, s, e, L)
        if c == lb.CLASSIFY:
            probs = self._head("precise", "classify.kind").proba(q)[0]
            kind = max(sorted(probs), key=lambda k: probs[k])
            s, e = self._span("classify", q, L) if kind in lb.KINDS else (0.0, 0.0)
            return decode.classify_answer(kind, s, e, L)
        if c == lb.MAGNITUDE:
            return decode.magnitude_answer(math.expm1(float(self._head("precise", "magnitude.log1p").value(q)[0])))
        if c == lb.ALL_CHANNELS:
            probs = [
                p.get(True, 0.0)
                for p in self._head("precise", "all_channels.channel").proba(channel_rows(ex, channel_names))
            ]
            flagged = sorted((i for i, p in enumerate(probs) if p >= 0.5), key=lambda i: (-probs[i], i))[:3]
            events = []
            for i in flagged:
                row = dict(zip(F.CHANNEL_FEATURES, feats.matrix[i]))
                widened = widened_run(values[i]) if values is not None else None
                if widened is not None:
                    s, e = widened
                elif row["run_start"] >= 0:  # the longest |z| > 4 run
                    s, e = _raw_index(row["run_start"], L), _raw_index(row["run_end"], L)
                else:
                    centre = _raw_index(row["argmax_abs_z"], L)
                    s, e = centre - FALLBACK_WIDTH / 2, centre + FALLBACK_WIDTH / 2
                events.append((channel_names[i], s, max(e, s + 1)))
            return decode.all_channels_answer(events, L)
        if c == lb.LEAD_LAG:
            probs = self._head("precise", "lead_lag.direction").proba(q)[0]
            direction = max(sorted(probs), key=lambda k: probs[k])
            lag = float(self._head("precise", "lead_lag.lag").value(q)[0]) * L if direction != "independent" else 0.0
            return decode.lead_lag_answer(direction, abs(lag), L)
        if c == lb.IDENTIFICATION:
            asked = decode.named_channels(options)
            probs = self._head("coarse", "identification.channel").proba(channel_rows(ex, asked)) if asked else []
            return {
                "answer": decode.identification_option(options, {n: p.get(True, 0.0) for n, p in zip(asked, probs)})
            }
        if c in lb.MCQ_CATEGORIES:
            probs = self._head("coarse", c).proba(q)[0]
            return {"answer": decode.best_option(options, probs)}
        raise ValueError(f"unknown category {category!r}")


# ---------------------------------------------------------------------------------------------
# Training entry point
# ---------------------------------------------------------------------------------------------


def data_files(data_dir: Path, splits: Iterable[str] = SPLITS) -> list[Path]:
    """The existing <split>-<regime>.parquet files of a seed directory (train is required)."""
    data_dir = Path(data_dir)
    files = [data_dir / f"{s}-{r}.parquet" for s in splits for r in REGIMES]
    found = [p for p in files if p.exists()]
    if not any(p.name.startswith("train-") for p in found):
        raise FileNotFoundError(f"no train split in {data_dir}; run `tsbench generate --split train` (and --split val)")
    return found


def limited_rows(files: list[Path], train_rows: int) -> dict[Path, set[str]]:
    """The rows a training limit keeps: `train_rows` train-precise rows taken round-robin over the
    categories (each category's rows in a fixed hashed order), the train-coarse rows projected from
    those signals, and every validation row."""
    from tsbench.tasks.anomalyxl.rows import read_index

    keep: dict[Path, set[str]] = {}
    chosen: set[str] = set()
    precise = [p for p in files if p.name == "train-precise.parquet"]
    for path in precise:
        index = read_index(path)
        rows = zip(index["category"], index["id"], index["plan"])
        order = sorted(rows, key=lambda r: (r[0], hashlib.blake2b(r[1].encode(), digest_size=8).hexdigest()))
        by_category: dict[str, list] = {}
        for category, rid, plan in order:
            by_category.setdefault(category, []).append((rid, plan))
        picked: list = []
        queues = [list(reversed(rows)) for _, rows in sorted(by_category.items())]
        while len(picked) < train_rows and any(queues):
            for queue in queues:
                if queue and len(picked) < train_rows:
                    picked.append(queue.pop())
        keep[path] = {rid for rid, _ in picked}
        chosen |= {signal_key(json.loads(plan)) for _, plan in picked}
    for path in files:
        if path in keep:
            continue
        index = read_index(path)
        if path.name.startswith("train-"):
            keep[path] = {
                rid for rid, plan in zip(index["id"], index["plan"]) if signal_key(json.loads(plan)) in chosen
            }
        else:
            keep[path] = set(index["id"])
    return keep


def refuse_foreign_out(out: Path) -> None:
    """Training writes meta.json, heads/ and features/ into `out` (and may unlink a stale head file), so
    it goes only into a missing or empty folder or one a classical training wrote (its meta.json, or
    the feature cache of a run that stopped before it)."""
    if out.is_symlink() or out.exists() and not out.is_dir():
        raise UserError(f"{out} is not a folder; refused to write a classical baseline there: choose another --out")
    if not out.is_dir() or not any(out.iterdir()):
        return
    try:
        meta = json.loads((out / "meta.json").read_text())
        ours = isinstance(meta, dict) and "feature_version" in meta
    except (OSError, ValueError):
        features = out / "features"
        ours = features.is_dir() and all(p.name.startswith("part-") for p in features.iterdir())
    if not ours:
        raise UserError(
            f"{out} holds files but is not a classical baseline's folder (no meta.json); "
            "refused to write into it: choose another --out"
        )


def train_classical(
    data_dir: Path,
    out: Path,
    progress: Progress | None = None,
    *,
    seed: int = 42,
    workers: int = 2,
    splits: Iterable[str] = SPLITS,
    train_rows: int | None = None,
) -> dict:
    """Fit every head on the train + val splits of `data_dir` (both regimes) and save them to `out`.

    Features are cached per row under `out/features/`, so a second call only re-fits the heads.
    `progress(what, done, total)` is called as rows are featurised ("features", in channel-samples)
    and heads fitted ("heads"). `train_rows`: that many train-precise rows (`limited_rows`), the MCQ
    rows of their signals, all validation rows. Returns a summary: rows, head count, seconds per stage.
    """
    check(*CLASSICAL_PACKAGES, extra="classical")
    out = Path(out)
    refuse_foreign_out(out)
    out.mkdir(parents=True, exist_ok=True)
    files = data_files(data_dir, splits)
    ids = limited_rows(files, train_rows) if train_rows is not None else None
    started = time.perf_counter()
    cache = extract_features(files, out / "features", workers=workers, progress=progress, ids=ids)
    feature_s = time.perf_counter() - started
    counts: dict[str, int] = {}

    def counted(examples: Iterator[Example]) -> Iterator[Example]:
        for ex in examples:
            counts[ex.category] = counts.get(ex.category, 0) + 1
            yield ex

    started = time.perf_counter()
    tables = head_tables(counted(iter_examples(files, cache, ids)))
    del cache  # the tables hold what the heads need
    heads = fit_tables(tables, seed=seed, progress=progress)
    heads_s = time.perf_counter() - started
    summary = {
        "data_dir": str(data_dir),
        "files": [p.name for p in files],
        "rows": sum(counts.values()),
        "rows_by_category": counts,
        "train_rows_limit": train_rows,
        "workers": workers,
        "heads": len(heads),
        "seed": seed,
        "feature_seconds": round(feature_s, 2),
        "head_seconds": round(heads_s, 2),
    }
    save_heads(out, heads, {"training": summary, "xgb_params": XGB_PARAMS, "rounds": N_ROUNDS})
    return summary
