"""`generate`, `describe`, `score`: datasets in, files and tables out."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from tsbench.cli.common import (
    columns_console,
    console,
    err_console,
    floats,
    given,
    ints,
    progress_bar,
    require_file,
    split_list,
)
from tsbench.core import json_input
from tsbench.core.errors import UserError
from tsbench.core.out_paths import writable_file, writable_folder

LIST_OPTIONS = {"lengths": ints, "noise_weights": floats}


def family_of(path: Path) -> str:
    """The family a dataset file or folder belongs to, from the manifest beside it."""
    folder = path if path.is_dir() else path.parent
    manifest = folder / "manifest.json"
    if manifest.is_file():
        found = json_input.read_json(manifest)
        if not isinstance(found, dict):
            raise UserError(f"{manifest} is not a manifest (a JSON object)")
        return found.get("family") or "anomalyxl"
    return "anomalyxl"


def data_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.parquet"))
        if not files:
            raise UserError(f"no parquet files in {path}")
        return files
    require_file(path)
    return [path]


def generate(
    ctx: typer.Context,
    family: str = typer.Option("anomalyxl", help="Task family to generate."),
    seed: int = typer.Option(42, help="Run seed; the same seed and arguments give identical file bytes."),
    split: str = typer.Option("test", help="test, val, train or all."),
    preset: str = typer.Option(
        "paper", help="AnomalyXL: paper (the published grid) or small (short rows for demos and tests)."
    ),
    rows_per_cell: Optional[int] = typer.Option(None, help="AnomalyXL test rows per (category, L) cell (paper: 50)."),
    train_rows: Optional[int] = typer.Option(
        None, help="AnomalyXL train rows, spread evenly over the cells (paper: 5000)."
    ),
    val_rows: Optional[int] = typer.Option(
        None, help="AnomalyXL validation rows, spread evenly over the cells (paper: 500)."
    ),
    lengths: Optional[list[str]] = typer.Option(None, help="Series lengths for every category, e.g. 16384,32768."),
    categories: Optional[list[str]] = typer.Option(
        None,
        help="Precise categories to generate (comma-separated); TSAIA: mc (default), analysis, all or question types.",
    ),
    p_present: Optional[float] = typer.Option(
        None, help="Localize: probability that an anomaly is present (paper: 0.8)."
    ),
    min_k: Optional[int] = typer.Option(None, help="All-channels: smallest number of anomalous channels (paper: 0)."),
    width_range: Optional[tuple[int, int]] = typer.Option(None, help="Window width bounds in samples (paper: 8 256)."),
    magnitude_range: Optional[tuple[float, float]] = typer.Option(None, help="Magnitude bounds in sigma (paper: 2 6)."),
    noise_weights: Optional[list[str]] = typer.Option(
        None, help="Weights of white, red, ar1 base noise (paper: 1,1,1)."
    ),
    source: Optional[str] = typer.Option(
        None, help="TimeSage: synthetic (default), replay (statsmodels/aeon series), released or snapshot (--path)."
    ),
    scenarios: Optional[int] = typer.Option(None, help="TimeSage: number of scenarios (default 60: 20 per tier)."),
    periods: Optional[int] = typer.Option(None, help="TimeSage: periods per scenario (default 24)."),
    answer_format: Optional[str] = typer.Option(
        None, help="CiK: quantiles (TimeClaw's {levels, samples}, default) or samples (trajectories)."
    ),
    parser: Optional[str] = typer.Option(
        None, help="CiK: timeclaw (default: by keys), timeclaw-repo (the authors' parser exactly) or strict."
    ),
    out: Optional[Path] = typer.Option(
        None, help="Output root; files go to <out>/seed<seed>/ (default: data/<family>)."
    ),
    path: Optional[Path] = typer.Option(
        None,
        help="ltaf, sleep-psg, arfbench, timerbed: the folder of public files "
        "you have (nothing is downloaded); TimeSage --source released: "
        "the folder in the paper's layout.",
    ),
) -> None:
    """Generate a task family's dataset as parquet, with a manifest (AnomalyXL: precise + MCQ splits;
    TimeSage: scenarios + periods, audited before they are written)."""
    from tsbench.tasks import get_taskset

    taskset = get_taskset(family)
    options = {k: v for k, v in given(ctx).items() if k not in ("family", "out")}
    options.setdefault("seed", seed)
    for name, parse in LIST_OPTIONS.items():
        if name in options:
            options[name] = parse(options[name], f"--{name.replace('_', '-')}")
    if "categories" in options:
        options["categories"] = split_list(options["categories"])
    if "path" in options:
        options["path"] = str(options["path"])
    root = writable_folder(out or taskset.default_root(), "--out")
    with progress_bar(TextRate()) as bars:

        def progress(description: str, total: int):
            task = bars.add_task(description, total=total, rate="")
            started, done = time.perf_counter(), [0]

            def advance(rows: int) -> None:
                done[0] += rows
                bars.update(task, advance=rows, rate=f"{done[0] / max(time.perf_counter() - started, 1e-9):.1f} rows/s")

            return advance

        manifest, lines = taskset.generate(options, root, progress)
    table = Table("file", "rows", "MB", "sha256", title=f"{family} seed {options['seed']}")
    for line in lines:
        table.add_row(line["file"], str(line["rows"]), f"{line['bytes'] / 2**20:.1f}", line["sha256"][:16])
    console.print(table)
    for line in lines:
        if line.get("note"):  # what the reader left out, e.g. records too short for one window
            console.print(line["note"], markup=False)
    console.print(f"manifest: {manifest}")


def TextRate():
    from rich.progress import TextColumn

    return TextColumn("{task.fields[rate]}")


def describe(
    data: Path = typer.Argument(..., help="A generated parquet file or a seed dir."),
    plot: Optional[str] = typer.Option(
        None, help="Draw this row id (AnomalyXL: full series, gold window shaded, zoom inset)."
    ),
    run: Optional[Path] = typer.Option(
        None, help="With --plot: overlay this run's parsed answer for the row (AnomalyXL: its window)."
    ),
    out: Optional[Path] = typer.Option(None, help="Image path for --plot (.png, .svg or .pdf) [<row id>.png]."),
) -> None:
    """Print what a generated file holds, or draw one row."""
    from tsbench.tasks import get_taskset

    if not data.exists():
        raise UserError(f"no such file or directory: {data}")
    taskset = get_taskset(family_of(data))
    files = data_files(data)
    if plot is not None:
        out = out or Path(f"{plot}.png")
        if not out.suffix:
            out = out.with_suffix(".png")
        if out.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise UserError(f"--out {out}: the image must be .png, .svg or .pdf")
        writable_file(out, "--out")
        predicted = _predicted_answer(run, plot) if run is not None else None
        written = taskset.plot(files, plot, out, predicted)  # a file that is not the family's ends in one line
        if written is None:
            raise UserError(f"no row with id {plot!r} in {data}")
        console.print(f"wrote {written}")
        return
    out_console = columns_console()
    for title, frame in taskset.describe(files):
        table = Table(*[str(c) for c in frame.columns], title=title)
        for values in frame.itertuples(index=False):
            table.add_row(*[Text(str(v)) for v in values])  # literal: cells may hold [lists]
        out_console.print(table)


def _predicted_answer(run: Path, row_id: str) -> Any:
    """The run's parsed answer for the row (JSON), or None when it has none."""
    from tsbench.results import is_run_dir, load_samples

    if not is_run_dir(run):
        raise UserError(f"{run} is not a run dir (no run.json)")
    samples = load_samples(run)
    hit = samples[(samples["id"] == row_id) & samples["parsed_answer"].notna()]
    if hit.empty:
        return None
    return json.loads(hit.iloc[0]["parsed_answer"])


def score(
    data: Path = typer.Option(..., help="A generated parquet file."),
    responses: Path = typer.Option(..., help='JSONL with one {"id": ..., "response": ...} per line.'),
    out: Optional[Path] = typer.Option(
        None,
        help="Write per-row scores and metrics to this parquet file (parsed_answer and gold_answer as JSON "
        "text, as in samples.parquet: answers of any type side by side).",
    ),
) -> None:
    """Score your own predictions against a generated file and print per-category means."""
    import pandas as pd

    from tsbench.core.stats import macro_f1
    from tsbench.tasks import get_taskset

    require_file(data)
    require_file(responses)
    if out is not None and out.is_dir():
        raise UserError(f"--out {out} is a directory; give the parquet file to write")
    if out is not None:
        writable_file(out, "--out")
    given_responses = _read_responses(responses)
    taskset = get_taskset(family_of(data))
    index = taskset.index([data], {})
    if not set(given_responses) & set(index["id"]):
        raise UserError(
            f"none of the {len(given_responses)} response ids in {responses} is a row of {data}: wrong --data file?"
        )
    rows, answers = [], []  # answers: (parsed, gold) as the scorer gave them, before pandas infers a type
    for rec in index.itertuples():
        gold = json.loads(rec.gold)
        response = given_responses.get(rec.id)
        scored = taskset.score(rec.category, gold, response if response is not None else "")
        answers.append((_answer_of(scored.parsed), gold.get("answer") if isinstance(gold, dict) else None))
        rows.append(
            {
                "id": rec.id,
                "category": rec.category,
                "answered": response is not None,
                "score": scored.score,
                "valid": scored.valid,
                "gold_answer": gold.get("answer") if isinstance(gold, dict) else None,
                "parsed_answer": _answer_cell(scored.parsed),
                "answer_error": scored.error,
                "metrics": json.dumps(scored.metrics),
            }
        )
    df = pd.DataFrame(rows)
    unknown = set(given_responses) - set(index["id"])
    if unknown:
        err_console.print(f"warning: {len(unknown)} response ids are not in {data.name} (ignored)", markup=False)
    unanswered = int((~df["answered"]).sum())
    if unanswered:
        err_console.print(f"warning: {unanswered} of {len(df)} rows have no response (scored 0)", markup=False)
    columns = {c.category: c for c in taskset.columns()}
    table = Table(
        "category", "rows", "valid", "invalid", "no response", "mean", "macro-F1", title=f"scores: {data.name}"
    )
    for category, group in df.groupby("category", sort=False):
        f1 = ""
        column = columns.get(category)
        if column is not None and column.options is not None and group["gold_answer"].notna().all():
            preds = [p or "" for p in group["parsed_answer"]]
            f1 = f"{macro_f1(list(group['gold_answer']), preds, list(column.options) or None):.3f}"
        valid, answered = group["valid"].astype(bool), group["answered"].astype(bool)
        counts = (int(valid.sum()), int((answered & ~valid).sum()), int((~answered).sum()))
        table.add_row(category, str(len(group)), *map(str, counts), f"{group['score'].mean():.3f}", f1)
    console.print(table)
    invalid = int((df["answered"] & ~df["valid"].astype(bool)).sum())
    console.print(
        f"rows: {int(df['valid'].sum())} valid, {invalid} invalid (no answer the scorer reads: scored 0), "
        f"{unanswered} without a response (scored 0)",
        markup=False,
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        score_table(df, answers).to_parquet(out, index=False)
        console.print(f"wrote {out}")


def _answer_of(parsed):
    return parsed if isinstance(parsed, str) else parsed.get("answer") if isinstance(parsed, dict) else None


def _answer_cell(parsed):
    """The answer a scorer read, for the table: a label or number as is, an object or list as JSON text."""
    answer = _answer_of(parsed)
    return json.dumps(answer, ensure_ascii=False, default=str) if isinstance(answer, (dict, list)) else answer


def score_table(df, answers: list[tuple]):
    """The --out table: the answers (parsed, gold per row) as JSON text (null where none), whatever mix
    of text, numbers, booleans, lists and objects the rows hold (one parquet column has one type: "A"
    beside 1 stopped the write with a pyarrow error)."""
    table = df.copy()
    table["parsed_answer"] = [_json_cell(parsed) for parsed, _ in answers]
    table["gold_answer"] = [_json_cell(gold) for _, gold in answers]
    return table


def _json_cell(value) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _response_text(value) -> str:
    """A response as the text a model would have sent: a JSON object or list (a structured answer
    written straight into the JSONL) becomes its JSON text, not Python's repr."""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else json.dumps(value)


def _read_responses(path: Path) -> dict[str, str]:
    """id -> response text from a JSONL file; bad encodings, bad lines and repeated ids are one line each."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    found: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json_input.loads(line)
            rid, response = str(rec["id"]), _response_text(rec["response"])
        except (ValueError, KeyError, TypeError):  # ValueError: malformed or nested too deeply
            raise UserError(f"{path}:{n}: each line must be a JSON object with 'id' and 'response'") from None
        if rid in found:
            raise UserError(f"{path}:{n}: id {rid!r} repeats line {first_line[rid]}; give one response per id")
        found[rid], first_line[rid] = response, n
    return found
