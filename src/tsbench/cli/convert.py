"""`convert-tsaia`: a published release whose files are pickles, made parquet with the pickles loaded
in the jail only (interop/tsaia_convert.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from tsbench.cli.common import console, progress_bar


def convert_tsaia(
    path: Path = typer.Option(..., help="The Melady/TSAIA release folder (the CSVs and the pickles they name)."),
    out: Path = typer.Option(Path("data/tsaia-release"), help="Where the parquet tables and conversion.json go."),
    skip_unreadable: bool = typer.Option(
        False, help="Convert the rest when a file cannot be loaded (its item is skipped, and named in conversion.json)."
    ),
) -> None:
    """Convert TSAIA's release to parquet: each pickle is loaded inside the jail (no network, no host
    files) and comes back as data; then `tsbench generate --family tsaia --path OUT`."""
    from tsbench.core.out_paths import writable_folder
    from tsbench.interop.tsaia_convert import convert_release

    writable_folder(out, "--out")
    with progress_bar() as bars:

        def progress(description: str, total: int):
            task = bars.add_task(description, total=total)
            return lambda n: bars.update(task, advance=n)

        manifest = convert_release(path, out, skip_unreadable=skip_unreadable, progress=progress)
    console.print(f"converted: {manifest.parent} (then: tsbench generate --family tsaia --path {manifest.parent})")
