"""Is a score on a published generated split contaminated? Regenerate it with new seeds and look.

A procedurally generated family can answer what no static benchmark can: the same generator, the
same config, the same cells and rows per cell, only the seed changed, gives a split of the same
difficulty that no model can have seen. A model that scores clearly higher on the published split
than on the fresh one has learnt that split's answers, not the task.

Rows pair by cell (`paired_by_cell`): a generated id names its cell and its place in the cell
(`test-localize-1024-00002` in both splits), so each pair is two draws of the same cell; a derived
MCQ row pairs with its category's row of the same rank. The interval is the paired bootstrap of
published − fresh over those pairs (leaderboard/compare.py, with its exact or
permutation p-values, Holm across categories). The verdict is "published split scores higher" when
the overall gap's corrected p is under 0.05 and its interval lies above 0; otherwise the report
says there is no evidence at this n and how many rows a gap that size would need.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tsbench.api import Dataset, PathLike, Run, evaluate, generate, user_errors
from tsbench.core.errors import UserError
from tsbench.leaderboard.compare import Comparison, compare_frames, fmt_p

PUBLISHED, FRESH = "published", "fresh"
LEVEL = 0.05
FRESH_SEED_OFFSET = 1_000_003  # the default fresh seed: far from any seed a user would pick by hand
# The generate options a manifest's recorded config maps back to (the rest must come out the same).
_OPTION_KEYS = ("preset", "rows_per_cell", "train_rows", "val_rows", "p_present", "min_k")
_PAIR_KEYS = ("width_range", "magnitude_range", "noise_weights", "categories")


def fresh_options(manifest: dict, split: str, seed: int) -> dict[str, Any]:
    """`generate` options that rebuild ``split`` of ``manifest`` with ``seed``: same config, same cells."""
    entry = (manifest.get("splits") or {}).get(split)
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        splits = ", ".join(sorted(manifest.get("splits") or {})) or "none"
        raise UserError(
            f"the manifest records no generator config for split {split!r} (its splits: {splits}); "
            "the contamination probe needs a generated family's manifest"
        )
    config = entry["config"]
    options: dict[str, Any] = {"seed": seed, "split": split}
    options.update({k: config[k] for k in _OPTION_KEYS if config.get(k) is not None})
    options.update({k: list(config[k]) for k in _PAIR_KEYS if config.get(k) is not None})
    single, multi = config.get("single_lengths"), config.get("multi_lengths")
    if single is not None and single == multi:
        options["lengths"] = list(single)
    return options


def same_design(published: dict, fresh: dict, split: str) -> str | None:
    """Why the fresh split is not the published one's design, or None: the config but the seed must
    match, every generated category's cells (L -> rows) too, and every derived category (AnomalyXL's
    MCQ rows, projected from seed-chosen sources) its number of rows."""
    a, b = published["splits"][split], fresh["splits"][split]
    config_a = {k: v for k, v in a["config"].items() if k != "seed"}
    config_b = {k: v for k, v in b["config"].items() if k != "seed"}
    if config_a != config_b:
        differing = sorted(k for k in set(config_a) | set(config_b) if config_a.get(k) != config_b.get(k))
        return f"the regenerated config differs in {', '.join(differing)}"
    cells_a, cells_b = a.get("cells") or {}, b.get("cells") or {}
    generated = set(config_a.get("categories") or [])
    for category in sorted(set(cells_a) | set(cells_b)):
        one, two = cells_a.get(category) or {}, cells_b.get(category) or {}
        if (one != two) if category in generated else (sum(one.values()) != sum(two.values())):
            return f"the regenerated split has other cells or rows for {category}"
    return None


def paired_by_cell(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with `id` replaced by their place in their cell: (category, k-th row by length and id),
    per epoch. A generated category's ids already name (category, L, index), so this pairs exactly
    those; a derived row (an MCQ question on a seed-chosen source) pairs with the same category's
    row of the same rank, the cell being the category."""
    ordered = rows.sort_values(["category", "epoch", "length", "id"], kind="stable")
    rank = ordered.groupby(["category", "epoch"], sort=False).cumcount()
    return ordered.assign(id=ordered["category"].astype(str) + "#" + rank.map("{:05d}".format))


@dataclass
class ContaminationReport:
    """The two runs, their comparison (published − fresh) and the verdict."""

    published: Run
    fresh: Run
    comparison: Comparison
    published_hash: str
    fresh_hash: str
    published_seed: int
    fresh_seed: int
    flagged: bool
    verdict: str
    out: Path  # the folder holding the fresh data, both runs and contamination.json

    def lines(self) -> list[str]:
        c = self.comparison
        out = [
            f"published split seed {self.published_seed} (sha {self.published_hash}) vs fresh split seed "
            f"{self.fresh_seed} (sha {self.fresh_hash}): {c.common} rows paired by cell",
        ]
        pair = c.pairs[0]
        for line in pair.categories:
            r = line.result
            out.append(
                f"  {line.category}: published {r.mean_a:.3f}, fresh {r.mean_b:.3f}, gap {r.diff:+.3f} "
                f"[{r.lo:.3f}, {r.hi:.3f}], {fmt_p(line.p_holm)} (Holm), n = {r.n}"
            )
        r = pair.overall.result
        out.append(
            f"overall: published − fresh = {r.diff:+.3f} [{r.lo:.3f}, {r.hi:.3f}], {fmt_p(pair.overall.p_holm)}, n = {r.n}"
        )
        out.append(f"verdict: {self.verdict}")
        return out


def verdict(comparison: Comparison, level: float = LEVEL) -> tuple[bool, str]:
    """(flagged, text) from the published − fresh comparison's overall line."""
    line = comparison.pairs[0].overall
    r = line.result
    gap = f"{r.diff:+.3f} [{r.lo:.3f}, {r.hi:.3f}], {fmt_p(line.p_holm)}, n = {r.n}"
    if line.p_holm < level and r.lo > 0:
        return True, f"published split scores higher by {gap}: the model may have memorised the published split"
    if line.p_holm < level and r.hi < 0:
        return False, f"no evidence of memorisation: the fresh split scores higher ({gap})"
    need = "" if r.rows_needed is None else f"; a true gap this size needs about {r.rows_needed} rows at 80 % power"
    return False, f"no evidence of memorisation at this n (gap {gap}{need})"


def probe(
    model: str,
    data: PathLike,
    *,
    harness: str | None = None,
    split: str = "test",
    fresh_seed: int | None = None,
    out: PathLike | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    **settings: Any,
) -> ContaminationReport:
    """Regenerate ``data``'s split with a fresh seed, evaluate ``model`` under ``harness`` on both
    (as `tsbench eval` does, any eval ``settings`` by name), and compare them row by row. The fresh
    data, both runs and contamination.json go to ``out`` (re-running resumes both runs)."""
    with user_errors():
        published = Dataset.load(data)
        if split not in (published.manifest.get("splits") or {}):
            raise UserError(f"{published.path} has no {split!r} split in its manifest")
        family = published.manifest.get("family") or "anomalyxl"
        old_seed = int(published.manifest.get("seed", 0))
        new_seed = old_seed + FRESH_SEED_OFFSET if fresh_seed is None else int(fresh_seed)
        if new_seed == old_seed:
            raise UserError(f"--fresh-seed must differ from the published split's seed {old_seed}")
        name = model.replace("/", "_").strip("_")[:60]
        work = Path(out) if out is not None else Path("results/contamination") / f"{name}-seed{old_seed}-vs-{new_seed}"
        fresh = generate(family, out=work / "data", **fresh_options(published.manifest, split, new_seed))
        if problem := same_design(published.manifest, fresh.manifest, split):
            raise UserError(f"cannot rebuild {published.path}'s {split} split with a new seed: {problem}")
        files = lambda d: [str(f) for f in d.files if f.name.startswith(f"{split}-")]  # noqa: E731
        common = dict(settings, family=family, split=split)
        runs = {
            PUBLISHED: evaluate(model, files(published), harness=harness, out=work / PUBLISHED, **common),
            FRESH: evaluate(model, files(fresh), harness=harness, out=work / FRESH, **common),
        }
        comparison = compare_frames(
            {label: paired_by_cell(run.rows) for label, run in runs.items()},
            n_boot=n_boot,
            seed=seed,
            paths={label: run.run_dir for label, run in runs.items()},
        )
    comparison.dataset = f"{family} {split}"
    flagged, text = verdict(comparison)
    report = ContaminationReport(
        published=runs[PUBLISHED],
        fresh=runs[FRESH],
        comparison=comparison,
        published_hash=published.data_hash(split),
        fresh_hash=fresh.data_hash(split),
        published_seed=old_seed,
        fresh_seed=new_seed,
        flagged=flagged,
        verdict=text,
        out=work,
    )
    write_report(report)
    return report


def write_report(report: ContaminationReport) -> Path:
    """contamination.json beside the two runs: the verdict and every number, for a notebook or a CI gate."""
    path = report.out / "contamination.json"
    body = {
        "published": {
            "run": str(report.published.run_dir),
            "seed": report.published_seed,
            "sha": report.published_hash,
        },
        "fresh": {"run": str(report.fresh.run_dir), "seed": report.fresh_seed, "sha": report.fresh_hash},
        "flagged": report.flagged,
        "verdict": report.verdict,
        "rows": report.comparison.table().to_dict("records"),
    }
    path.write_text(json.dumps(body, indent=2, default=str) + "\n", encoding="utf-8")
    return path
