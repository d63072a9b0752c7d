"""The `tsbench` command: one thin function per subcommand over the library.

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tsbench.errors import UserError

app = typer.Typer(
    help="Long-context time-series benchmarks for language-model agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
console = Console()
err_console = Console(stderr=True)


def _split_list(values: Optional[list[str]]) -> Optional[list[str]]:
    """Accept `--x a,b` and `--x a --x b` alike."""
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _ints(values: Optional[list[str]], flag: str) -> Optional[list[int]]:
    items = _split_list(values)
    if items is None:
        return None
    try:
        return [int(v) for v in items]
    except ValueError:
        raise UserError(f"{flag} takes integers (got {' '.join(items)})") from None


def _floats(values: Optional[list[str]], flag: str) -> Optional[list[float]]:
    items = _split_list(values)
    if items is None:
        return None
    try:
        return [float(v) for v in items]
    except ValueError:
        raise UserError(f"{flag} takes numbers (got {' '.join(items)})") from None


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} rows"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    )


@app.command()
def generate(
    seed: int = typer.Option(42, help="Run seed; the same seed and arguments give identical file bytes."),
    split: str = typer.Option("test", help="test, val, train or all."),
    preset: str = typer.Option("paper", help="paper (the published grid) or small (short rows for demos and tests)."),
    rows_per_cell: Optional[int] = typer.Option(None, help="Test rows per (category, L) cell [paper: 50]."),
    train_rows: Optional[int] = typer.Option(None, help="Train rows, spread evenly over the cells [paper: 5000]."),
    val_rows: Optional[int] = typer.Option(None, help="Validation rows, spread evenly over the cells [paper: 500]."),
    lengths: Optional[list[str]] = typer.Option(None, help="Series lengths for every category, e.g. 16384,32768."),
    categories: Optional[list[str]] = typer.Option(None, help="Precise categories to generate (comma-separated)."),
    p_present: Optional[float] = typer.Option(None, help="Localize: probability that an anomaly is present [0.8]."),
    min_k: Optional[int] = typer.Option(None, help="All-channels: smallest number of anomalous channels [0]."),
    width_range: Optional[tuple[int, int]] = typer.Option(None, help="Window width bounds in samples [8 256]."),
    magnitude_range: Optional[tuple[float, float]] = typer.Option(None, help="Magnitude bounds in sigma [2 6]."),
    noise_weights: Optional[list[str]] = typer.Option(None, help="Weights of white, red, ar1 base noise [1,1,1]."),
    out: Path = typer.Option(Path("data/anomalyxl"), help="Output root; files go to <out>/seed<seed>/."),
) -> None:
    """Generate AnomalyXL splits (precise + MCQ projection) as parquet, with a manifest."""
    from tsbench.anomalyxl import config as gen_config
    from tsbench.anomalyxl.generate import generate_split, total_rows, update_manifest
    from tsbench.anomalyxl.validate import check_config

    splits = list(gen_config.SPLITS) if split == "all" else [split]
    if any(s not in gen_config.SPLITS for s in splits):
        raise UserError(f"--split must be test, val, train or all (got {split})")
    cfg = gen_config.preset(
        preset, seed=seed, rows_per_cell=rows_per_cell, train_rows=train_rows, val_rows=val_rows,
        p_present=p_present, min_k=min_k,
        width_range=tuple(width_range) if width_range else None,
        magnitude_range=tuple(magnitude_range) if magnitude_range else None,
    )
    if (lens := _ints(lengths, "--lengths")) is not None:
        cfg.single_lengths = cfg.multi_lengths = tuple(sorted(set(lens)))
    if (cats := _split_list(categories)) is not None:
        cfg.categories = tuple(cats)
    if (weights := _floats(noise_weights, "--noise-weights")) is not None:
        cfg.noise_weights = tuple(weights)
    check_config(cfg)

    entries = {}
    with _progress() as progress:
        for name in splits:
            task = progress.add_task(name, total=total_rows(cfg, name), rate="")
            started, written = time.perf_counter(), [0, 0]

            def advance(rows: int, values: int, task=task, started=started, written=written) -> None:
                written[0] += rows
                written[1] += values
                dt = max(time.perf_counter() - started, 1e-9)
                progress.update(task, advance=rows, rate=f"{written[0] / dt:.1f} rows/s {written[1] * 4 / dt / 2**20:.0f} MB/s")

            entries[name] = generate_split(cfg, name, out, progress=advance)
    manifest = update_manifest(cfg, out, entries)
    table = Table("file", "rows", "MB", "sha256", title=f"AnomalyXL seed {seed} ({cfg.preset})")
    for entry in entries.values():
        for fname, info in entry["files"].items():
            table.add_row(fname, str(info["rows"]), f"{info['bytes'] / 2**20:.1f}", info["sha256"][:16])
    console.print(table)
    console.print(f"manifest: {manifest}")


@app.command()
def describe(
    data: Path = typer.Argument(..., help="A generated parquet file."),
    plot: Optional[str] = typer.Option(None, help="Draw this row id (full series, gold window shaded, zoom inset)."),
    out: Optional[Path] = typer.Option(None, help="PNG path for --plot [<row id>.png]."),
) -> None:
    """Print what a generated file holds, or draw one row."""
    from tsbench.anomalyxl.describe import composition
    from tsbench.anomalyxl.rows import iter_rows, read_index

    _require_file(data)
    if plot is not None:
        from tsbench.anomalyxl.figure import plot_row

        row = next(iter_rows(data, ids={plot}), None)
        if row is None:
            raise UserError(f"no row with id {plot!r} in {data}")
        console.print(f"wrote {plot_row(row, out or Path(f'{plot}.png'))}")
        return
    comp = composition(read_index(data))
    cells = comp["cells"]
    table = Table("category", *[str(c) for c in cells.columns], "total", title=f"{data.name}: {comp['rows']} rows (category x L)")
    for category, counts in cells.iterrows():
        table.add_row(category, *[str(v) for v in counts], str(int(counts.sum())))
    console.print(table)
    details = Table("category", "composition", title="composition")
    for category, info in comp["categories"].items():
        parts = [f"{k}: {v}" for k, v in info.items() if k != "rows"]
        details.add_row(category, "\n".join(parts))
    console.print(details)


@app.command()
def score(
    data: Path = typer.Option(..., help="A generated parquet file (precise or coarse)."),
    responses: Path = typer.Option(..., help="JSONL with one {\"id\": ..., \"response\": ...} per line."),
    out: Optional[Path] = typer.Option(None, help="Write per-row scores and metrics to this parquet file."),
) -> None:
    """Score your own predictions against a generated file and print per-category means."""
    import pandas as pd

    from tsbench.anomalyxl.rows import read_index
    from tsbench.scoring import metrics
    from tsbench.scoring.aggregate import macro_f1

    _require_file(data)
    _require_file(responses)
    given = {}
    for n, line in enumerate(responses.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            given[str(rec["id"])] = str(rec["response"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise UserError(f"{responses}:{n}: each line must be a JSON object with 'id' and 'response'") from None
    index = read_index(data)
    rows = []
    for rec in index.itertuples():
        gold = json.loads(rec.gold)
        response = given.get(rec.id)
        m = metrics(rec.category, gold, response if response is not None else "")
        rows.append({
            "id": rec.id, "category": rec.category, "length": rec.length, "answered": response is not None,
            "score": m["score"], "valid": m["valid"], "gold_answer": gold.get("answer"),
            "parsed_answer": m["parsed"] if isinstance(m["parsed"], str) else None,
            "metrics": json.dumps(m, default=str),
        })
    df = pd.DataFrame(rows)
    unknown = set(given) - set(index["id"])
    if unknown:
        err_console.print(f"warning: {len(unknown)} response ids are not in {data.name} (ignored)")
    table = Table("category", "rows", "answered", "mean score", "macro-F1", title=f"scores: {data.name}")
    for category, group in df.groupby("category", sort=False):
        f1 = ""
        if group["gold_answer"].notna().all():
            options = sorted({o for opts in index.loc[index.category == category, "options"] for o in opts})
            f1 = f"{macro_f1(list(group['gold_answer']), [p or '' for p in group['parsed_answer']], options):.3f}"
        table.add_row(category, str(len(group)), str(int(group["answered"].sum())), f"{group['score'].mean():.3f}", f1)
    console.print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_parquet(out, index=False)
        console.print(f"wrote {out}")


def _require_file(path: Path) -> None:
    if not path.is_file():
        raise UserError(f"no such file: {path}")


def main() -> None:
    try:
        app()
    except (UserError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    main()
