"""The TimerBed board (TimeMaster Tables 1 and 3): per task accuracy and macro-F1, their Avg. over the
six tasks, each as mean ± sd over seeds, and with --with-paper the paper's rows, labelled as quoted.

A seed is a replicate of one configuration: runs whose model (or run name) differs only by a
`seed<k>` tag (checkpoints trained with different seeds, TimeMaster's protocol) and, within a run,
each `--epochs` repeat. Per seed the task's accuracy is the mean row score and its macro-F1 is over the
task's classes (error rows left out, as in the main table); Avg. is the mean of the six task values of
that seed (over the tasks every seed of the configuration ran: all six on a full board); the board shows the mean over seeds ± their sample sd (ddof 1), and "n seeds". The paper
reports accuracy only, so its rows fill the accuracy columns and leave macro-F1 empty.
"""

from __future__ import annotations

import io
import math
import re
from importlib import resources

import pandas as pd

from .columns import family_columns
from .result import DASH, LeaderboardResult
from .stats import gold_option, mcq_macro_f1, predicted_option

FAMILY = "timerbed"
PAPER_FILE = "paper_timerbed.csv"
PAPER_LABEL = "quoted from TimeMaster Table 1 (accuracy %; TimeMaster SFT+RL ± sd from Table 3), not computed here"
PROTOCOL_SEEDS = 3
_SEED_TAG = re.compile(r"[-_.]?seed[-_]?(\d+)", re.IGNORECASE)
Section = tuple[str, str, tuple[list, list[list]]]


def split_seed(name: str) -> tuple[str, str]:
    """(name without its seed tag, the seed) — ("local/ckpt-tm", "2") for "local/ckpt-tm-seed2"."""
    found = list(_SEED_TAG.finditer(name))
    if not found:
        return name, ""
    last = found[-1]
    return name[: last.start()] + name[last.end() :], last.group(1)


def replicates(rows: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """One line per (configuration, seed, task): accuracy, macro-F1 and n (scored rows)."""
    columns = {c.category: c for c in family_columns(FAMILY) or ()}
    part = rows[(rows["dataset"] == dataset) & rows["category"].isin(columns) & rows["score"].notna()]
    records = []
    if part.empty:
        return pd.DataFrame(columns=["config", "seed", "category", "accuracy", "f1", "n"])
    model_seed = part["model"].astype(str).map(split_seed)
    run_seed = part["run_name"].astype(str).map(lambda n: split_seed(n)[1])
    part = part.assign(
        base=[m for m, _ in model_seed],
        seed=[f"{s or r or '-'}/e{int(e)}" for (_, s), r, e in zip(model_seed, run_seed, part["epoch"])],
    )
    for (base, harness, depth, seed, category), group in part.groupby(
        ["base", "harness", "depth", "seed", "category"], sort=True
    ):
        golds = [gold_option(g) for g in group["gold"]]
        preds = [predicted_option(p) for p in group["parsed_answer"]]
        records.append(
            {
                "config": f"{base} · {harness} · depth {depth}",
                "seed": seed,
                "category": category,
                "accuracy": float(group["score"].astype(float).mean()),
                "f1": float(mcq_macro_f1(columns[category].options or (), golds, preds)),
                "n": len(group),
            }
        )
    return pd.DataFrame(records)


def _mean_sd(values: list[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def board(reps: pd.DataFrame) -> pd.DataFrame:
    """One line per (configuration, metric): mean and sd over seeds of each task and of Avg."""
    tasks = [c.category for c in family_columns(FAMILY) or ()]
    records = []
    for config, part in reps.groupby("config", sort=True):
        seeds = sorted(part["seed"].unique())
        for metric in ("accuracy", "f1"):
            wide = part.pivot_table(index="seed", columns="category", values=metric, aggfunc="first")
            row = {"config": config, "metric": metric, "seeds": len(seeds)}
            for task in tasks:
                values = wide[task].dropna().tolist() if task in wide else []
                row[task], row[f"{task}_sd"] = _mean_sd(values) if values else (math.nan, math.nan)
            ran = wide.reindex(columns=[t for t in tasks if t in wide]).dropna(axis=1)  # tasks every seed ran
            averages = ran.mean(axis=1).tolist() if ran.shape[1] else []
            row["avg_tasks"] = ran.shape[1]
            row["avg"], row["avg_sd"] = _mean_sd(averages) if averages else (math.nan, math.nan)
            records.append(row)
    return pd.DataFrame(records)


def _cell(mean: float, sd: float) -> str:
    if mean != mean:
        return DASH
    return f"{100 * mean:.2f}" + ("" if sd != sd else f" ± {100 * sd:.2f}")


def paper_rows() -> pd.DataFrame:
    text = resources.files(__package__).joinpath(PAPER_FILE).read_text(encoding="utf-8")
    return pd.read_csv(io.StringIO(text), comment="#", dtype=str, keep_default_na=False)


def sections(table: pd.DataFrame, with_paper: bool) -> list[Section]:
    shorts = [(c.category, c.short) for c in family_columns(FAMILY) or ()]
    header = ["Configuration", "seeds", *[f"{s} acc" for _, s in shorts], "Avg. acc"]
    header += [f"{s} F1" for _, s in shorts] + ["Avg. F1"]
    rows = []
    for config, part in table.groupby("config", sort=True):
        acc, f1 = (part[part["metric"] == m].iloc[0] for m in ("accuracy", "f1"))
        cells = [_cell(acc[t], acc[f"{t}_sd"]) for t, _ in shorts] + [_cell(acc["avg"], acc["avg_sd"])]
        cells += [_cell(f1[t], f1[f"{t}_sd"]) for t, _ in shorts] + [_cell(f1["avg"], f1["avg_sd"])]
        seeds = int(acc["seeds"])
        if int(acc["avg_tasks"]) < len(shorts):  # an Avg. over fewer tasks than the paper's six says so
            cells[len(shorts)] += f" ({int(acc['avg_tasks'])} tasks)"
            cells[-1] += f" ({int(acc['avg_tasks'])} tasks)"
        rows.append([config, f"{seeds}" + ("" if seeds >= PROTOCOL_SEEDS else " (<3)"), *cells])
    if with_paper:
        for r in paper_rows().itertuples(index=False):
            accs = [getattr(r, t) for t, _ in shorts] + [r.avg]
            rows.append([f"{r.method} [paper: {r.section}]", "3" if "±" in r.rcw else DASH, *accs, *[DASH] * 7])
    intro = (
        "Accuracy and macro-F1 (%) per task and their Avg. over the six tasks, mean ± sd over seeds (TimeMaster's "
        f"protocol: {PROTOCOL_SEEDS} seeds; a seed is a run whose model differs only by a seed<k> tag, or an "
        "--epochs repeat). TimeMaster reports accuracy only; macro-F1 is tsbench's."
        + (f" Rows marked [paper: ...] are {PAPER_LABEL}." if with_paper else "")
    )
    return [("TimerBed (TimeMaster Tables 1 and 3)", intro, (header, rows))]


def attach(
    result: LeaderboardResult, rows: pd.DataFrame, datasets: list[str], with_paper: bool = False
) -> dict[str, pd.DataFrame]:
    """Add the TimerBed board to the `datasets` (those whose family names this board); returns the CSV
    frames to write."""
    frames = []
    for dataset in datasets:
        table = board(replicates(rows, dataset))
        if table.empty:
            continue
        result.family_sections.setdefault(dataset, []).extend(sections(table, with_paper))
        frames.append(table.assign(dataset=dataset))
    return {"timerbed_board.csv": pd.concat(frames, ignore_index=True)} if frames else {}
