"""`export`: a run in the formats other tools read (inspect_ai logs, Hugging Face datasets, long CSV),
and a generated benchmark as a Hugging Face dataset folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from tsbench.cli.common import console, is_terminal, progress_bar, require_run_dir
from tsbench.core.out_paths import writable_file, writable_folder


def export(
    run: Path = typer.Argument(
        ..., help="A run dir under results/, or (with --format hf) a generated data dir (manifest.json)."
    ),
    format: str = typer.Option(
        ...,
        "--format",
        "-f",
        help="inspect (an inspect_ai .eval log: `inspect view`), "
        "hf (a Hugging Face dataset folder with a card: datasets.load_dataset), csv (long form).",
    ),
    out: Optional[Path] = typer.Option(
        None, help="Where to write: a file (.eval/.json, .csv) or a folder [<run>/export/<format>/]."
    ),
) -> None:
    """Export a run for inspect_ai, the Hugging Face hub or a spreadsheet, or a generated benchmark
    as a Hugging Face dataset folder with a card."""
    from tsbench.interop import export_data, export_run
    from tsbench.interop.hf_data import data_dir_of, is_data_dir

    is_run = (Path(run) / "run.json").is_file()
    if out is not None:  # a folder for hf or a suffix-less name, else the file it names
        folder = format == "hf" or out.is_dir() or not out.suffix
        (writable_folder if folder else writable_file)(out, "--out")
    if not is_run and (format == "hf" or is_data_dir(run)):
        folder = data_dir_of(run)
        with _bar(f"export {folder.name}", len(list(folder.glob("*.parquet")))) as advance:
            written = export_data(folder, format, out, progress=advance)
    else:
        require_run_dir(run)
        with _bar(f"export {Path(run).name}", 1) as advance:
            written = export_run(run, format, out)
            advance(1)
    hints = {"inspect": f"inspect view --log-dir {written.parent}", "hf": f"datasets.load_dataset({str(written)!r})"}
    console.print(f"wrote {written}" + (f"  ({hints[format]})" if format in hints else ""))


@contextmanager
def _bar(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr in a terminal (files copied, or the run written); silent in logs."""
    if not is_terminal():
        yield lambda n: None
        return
    with progress_bar() as bars:
        task = bars.add_task(description, total=total)
        yield lambda n: bars.update(task, advance=n)
