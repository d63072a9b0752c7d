"""`export`: a run in the formats other tools read (inspect_ai logs, Hugging Face datasets, long CSV)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tsbench.cli.common import console, require_run_dir


def export(
    run: Path = typer.Argument(..., help="A run dir under results/."),
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
    """Export a run for inspect_ai, the Hugging Face hub or a spreadsheet."""
    from tsbench.interop import export_run

    require_run_dir(run)
    written = export_run(run, format, out)
    hints = {"inspect": f"inspect view --log-dir {written.parent}", "hf": f"datasets.load_dataset({str(written)!r})"}
    console.print(f"wrote {written}" + (f"  ({hints[format]})" if format in hints else ""))
