"""tsbench beside the tools people already use: runs exported to inspect_ai logs, Hugging Face
dataset folders and long CSV; generated benchmarks as Hugging Face dataset folders with a card
(`hf_data.py`); AnomalyXL as an inspect_ai task (`inspect eval tsbench/anomalyxl`).

This package sits at the edge: it reads results (and, for the inspect task, runs harnesses), and
nothing in tsbench imports it but the command line. inspect_ai is the `[inspect]` extra, imported
only by the modules that need it.
"""

from __future__ import annotations

from pathlib import Path

from tsbench.core.errors import UserError
from tsbench.core.extras import require

FORMATS = ("inspect", "hf", "csv")


def export_run(run_dir: str | Path, fmt: str, out: str | Path | None = None) -> Path:
    """Write one run in `fmt` and return what was written (a file, or the dataset folder for hf)."""
    from tsbench.interop.source import read_source

    if fmt not in FORMATS:
        raise UserError(f"--format must be one of {', '.join(FORMATS)} (got {fmt})")
    source = read_source(run_dir)
    target = Path(out) if out is not None else source.path / "export" / fmt  # beside the run's own files
    if fmt == "inspect":
        require("inspect_ai", extra="inspect", what="export --format inspect")
        from tsbench.interop.inspect_log import write_inspect_log

        return write_inspect_log(source, target)
    if fmt == "hf":
        from tsbench.interop.hf_dataset import write_hf_dataset

        return write_hf_dataset(source, target)
    from tsbench.interop.long_csv import write_long_csv

    return write_long_csv(source, target)


def export_data(data_dir: str | Path, fmt: str, out: str | Path | None = None, progress=None) -> Path:
    """Write a generated benchmark folder (manifest.json + parquet) as a Hugging Face dataset folder."""
    from tsbench.interop.hf_data import default_data_out, write_hf_data

    if fmt != "hf":
        raise UserError(f"a data dir exports only as --format hf (got {fmt}); the other formats take a run dir")
    target = Path(out) if out is not None else default_data_out(Path(data_dir))
    return write_hf_data(Path(data_dir), target, progress)


__all__ = ["FORMATS", "export_data", "export_run"]
