"""`tsbench compare`: two or more runs on the rows they all scored, per category and overall.

Rows are paired by (id, epoch); a row counts for a run when it was scored (error rows are never a
0, so they are rows the run lacks). Every pair of runs gets, per category and overall, the paired
difference, its paired bootstrap interval and an exact or permutation p-value (significance.py).
Category p-values are Holm-corrected across the pair's categories; the overall p-values across the
pairs. The statistics are pure functions of the aligned frames (`compare_frames`); `compare_runs`
is the edge that reads run directories through the results reader.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import pandas as pd

from tsbench.core.data_hash import split_hash
from tsbench.core.errors import UserError

from .significance import PairedResult, holm, paired_comparison
from .stats import cell_seed

OVERALL = "overall"
KEY = ["id", "epoch"]


@dataclass(frozen=True)
class Side:
    """One run as the comparison sees it."""

    label: str
    path: Path | None
    scored: int  # scored rows it has
    lacks: int  # rows some other run scored that it did not


@dataclass(frozen=True)
class Line:
    """One category (or overall) of one pair, with its corrected p-value."""

    category: str
    result: PairedResult
    p_holm: float


@dataclass
class PairComparison:
    a: str
    b: str
    overall: Line
    categories: list[Line] = field(default_factory=list)

    def console_line(self) -> str:
        r, p = self.overall.result, self.overall.p_holm
        return f"{self.a} − {self.b} = {r.diff:+.3f} [{r.lo:.3f}, {r.hi:.3f}], {fmt_p(p)} (Holm), n = {r.n}"


@dataclass
class Comparison:
    """Everything `tsbench compare` prints and writes."""

    sides: list[Side]
    common: int
    pairs: list[PairComparison]
    data_hash: str = ""  # the split's file hash (core/data_hash.py), "" when the runs do not record it
    dataset: str = ""
    n_boot: int = 1000
    seed: int = 0

    def lines(self) -> list[str]:
        """The console: what each run lacks, then one line per pair."""
        where = f"data {self.dataset}" + (f" (sha {self.data_hash})" if self.data_hash else "")
        lacks = "; ".join(f"{s.label} lacks {s.lacks}" for s in self.sides)
        return [f"{where}: {self.common} rows in common ({lacks})", *(p.console_line() for p in self.pairs)]

    def table(self) -> pd.DataFrame:
        """Long form: one line per (pair, category), overall last in each pair."""
        records = []
        for pair in self.pairs:
            for line in [*pair.categories, pair.overall]:
                records.append(
                    {
                        "a": pair.a,
                        "b": pair.b,
                        "category": line.category,
                        **line.result.as_dict(),
                        "p_holm": line.p_holm,
                    }
                )
        return pd.DataFrame(records)

    def markdown(self) -> str:
        header, rows = self.rows_table()
        out = [f"## Comparison ({', '.join(s.label for s in self.sides)})", "", self._intro(), ""]
        out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
        return "\n".join(out) + "\n"

    def html(self) -> str:
        header, rows = self.rows_table()
        head = "".join(f"<th>{escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
        return (
            f'<section class="compare"><h2>Comparison</h2><p>{escape(self._intro())}</p>'
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
        )

    def _intro(self) -> str:
        return (
            f"{self.lines()[0]}. Paired over (id, epoch) rows every run scored: a − b with a paired bootstrap "
            f"95 % interval ({self.n_boot} resamples, seed {self.seed}); McNemar exact where scores are 0/1, "
            "else a paired permutation test; category p-values Holm-corrected within each pair, overall p-values "
            "across pairs; rows for 80 % power = ((z₀.₉₇₅ + z₀.₈) · sd(a − b) / |a − b|)²."
        )

    def rows_table(self) -> tuple[list[str], list[list]]:
        header = [
            "a",
            "b",
            "Category",
            "n",
            "Mean a",
            "Mean b",
            "a − b",
            "95 % CI",
            "Test",
            "p",
            "p (Holm)",
            "Rows for 80 % power",
        ]
        rows = []
        for pair in self.pairs:
            for line in [*pair.categories, pair.overall]:
                r = line.result
                rows.append(
                    [
                        pair.a,
                        pair.b,
                        line.category,
                        r.n,
                        f"{r.mean_a:.3f}",
                        f"{r.mean_b:.3f}",
                        f"{r.diff:+.3f}",
                        f"[{r.lo:.3f}, {r.hi:.3f}]",
                        r.test,
                        fmt_p(r.p, bare=True),
                        fmt_p(line.p_holm, bare=True),
                        "—" if r.rows_needed is None else r.rows_needed,
                    ]
                )
        return header, rows


def fmt_p(p: float, bare: bool = False) -> str:
    text = "< 0.001" if p < 0.001 else f"{p:.3f}"
    if bare:
        return text
    return f"p {text}" if p < 0.001 else f"p = {text}"


def _scored(frame: pd.DataFrame) -> pd.DataFrame:
    """One scored row per (id, epoch): error rows and unscored rows are left out, the last kept."""
    ok = frame["score"].notna()
    if "error_type" in frame:
        ok &= frame["error_type"].isna()
    return frame.loc[ok, [*KEY, "category", "score"]].drop_duplicates(KEY, keep="last")


def compare_frames(
    frames: dict[str, pd.DataFrame], n_boot: int = 1000, seed: int = 0, paths: dict[str, Path] | None = None
) -> Comparison:
    """The comparison of runs given as {label: rows (id, epoch, category, score, error_type)}."""
    if len(frames) < 2:
        raise UserError(f"compare needs at least two runs (got {len(frames)})")
    scored = {label: _scored(frame) for label, frame in frames.items()}
    keys = {label: set(map(tuple, s[KEY].itertuples(index=False))) for label, s in scored.items()}
    union = set().union(*keys.values())
    common = set.intersection(*keys.values())
    sides = [Side(label, (paths or {}).get(label), len(keys[label]), len(union - keys[label])) for label in frames]
    if not common:
        lacks = ", ".join(f"{s.label} has {s.scored}" for s in sides)
        raise UserError(f"the runs have no scored rows in common ({lacks} scored rows)")
    labels = list(frames)
    joined = None
    for label in labels:
        part = scored[label].rename(columns={"score": label, "category": f"category:{label}"})
        joined = part if joined is None else joined.merge(part, on=KEY, how="inner")
    joined["category"] = joined[f"category:{labels[0]}"]
    joined = joined.sort_values(KEY, kind="stable").reset_index(drop=True)
    pairs = []
    for a, b in itertools.combinations(labels, 2):
        lines = []
        for category, part in joined.groupby("category", sort=True):
            result = paired_comparison(part[a], part[b], n_boot=n_boot, seed=cell_seed(seed, a, b, category))
            lines.append((category, result))
        adjusted = holm([r.p for _, r in lines])
        overall = paired_comparison(joined[a], joined[b], n_boot=n_boot, seed=cell_seed(seed, a, b, OVERALL))
        pairs.append(
            PairComparison(
                a, b, Line(OVERALL, overall, overall.p), [Line(c, r, p) for (c, r), p in zip(lines, adjusted)]
            )
        )
    for pair, p in zip(pairs, holm([pair.overall.result.p for pair in pairs])):
        pair.overall = Line(OVERALL, pair.overall.result, p)
    return Comparison(sides=sides, common=len(common), pairs=pairs, n_boot=n_boot, seed=seed)


def _labels(paths: list[Path]) -> list[str]:
    """Each run by its folder's name; the whole path where two folders share a name."""
    names = [p.name or str(p) for p in paths]
    return [str(p) if names.count(n) > 1 else n for p, n in zip(paths, names)]


def compare_runs(run_dirs: list[str | Path], n_boot: int = 1000, seed: int = 0) -> Comparison:
    """Read run directories (through the results reader) and compare them; a UserError, one line,
    for a missing run directory, fewer than two runs, runs on different data or no rows in common."""
    from tsbench.results import is_run_dir

    from .load import read_run

    paths = [Path(p) for p in run_dirs]
    for path in paths:
        if not is_run_dir(path):
            raise UserError(f"{path} is not a run directory (no run.json)")
    if len({p.resolve() for p in paths}) < 2:
        raise UserError(f"compare needs at least two different runs (got {', '.join(map(str, paths)) or 'none'})")
    if n_boot < 1:
        raise UserError(f"--n-boot must be at least 1 (got {n_boot})")
    frames, datasets, hashes = {}, set(), set()
    for label, path in zip(_labels(paths), paths):
        try:
            info, frame = read_run(path)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read run {path}: {' '.join(str(exc).split())[:200]}") from None
        frames[label] = frame
        datasets.add(info.dataset)
        hashes.add(_run_data_hash(path))
    if len(datasets) > 1:
        raise UserError(
            f"the runs were evaluated on different datasets ({', '.join(sorted(datasets))}): not comparable"
        )
    comparison = compare_frames(frames, n_boot=n_boot, seed=seed, paths=dict(zip(frames, paths)))
    comparison.dataset = datasets.pop()
    comparison.data_hash = hashes.pop() if len(hashes) == 1 else ""
    return comparison


def _run_data_hash(run_dir: Path) -> str:
    """The data hash of the files a run read, from run.json's dataset identity ("" if unrecorded)."""
    from tsbench.results import load_run

    identity = load_run(run_dir).get("dataset") or {}
    files = identity.get("file_sha256") if isinstance(identity, dict) else None
    return split_hash(files) if isinstance(files, dict) else ""


def write_comparison(comparison: Comparison, out: Path) -> dict[str, Path]:
    """compare.md, compare.html and compare.csv into ``out``."""
    from tsbench.core.sanitize import csv_frame

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; compare writes a folder")
    out.mkdir(parents=True, exist_ok=True)
    files = {"compare.md": out / "compare.md", "compare.html": out / "compare.html", "compare.csv": out / "compare.csv"}
    files["compare.md"].write_text("# tsbench compare\n\n" + comparison.markdown(), encoding="utf-8")
    files["compare.html"].write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>tsbench compare</title></head>'
        f"<body>{comparison.html()}</body></html>\n",
        encoding="utf-8",
    )
    csv_frame(comparison.table()).to_csv(files["compare.csv"], index=False)
    return files
