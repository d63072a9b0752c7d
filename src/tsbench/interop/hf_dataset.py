"""A tsbench run as a Hugging Face dataset folder: parquet per split and a dataset card.

`datasets.load_dataset(folder)` reads it (the card's `configs` name the files), and the folder can
be pushed to the Hub as is. The card's YAML header holds the config and the features (the schema);
its body the scores, the provenance (model, harness, dataset identity, commit, versions), the run's
config and every column's description. Map columns (attributes, metrics) are written as lists of
{key, value}: the Arrow map's own layout, which `datasets` has a type for.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core.own_folder import check_replaceable, record_owned
from tsbench.interop.hf_features import features
from tsbench.interop.public_gold import public_gold
from tsbench.interop.source import RunSource
from tsbench.interop.yaml_text import dump
from tsbench.results import RESULTS_JSON, RUN_JSON, results_json, to_table
from tsbench.results.schema import DESCRIPTIONS

CARD = "README.md"


def hf_table(table: pa.Table) -> pa.Table:
    """Maps become lists of {key, value} structs and `gold` the answer as a reader sees it (no
    underscore bookkeeping such as AnomalyXL's `_L`: public_gold.py); field descriptions are kept."""
    columns, fields = [], []
    for field, column in zip(table.schema, table.columns):
        if field.name == "gold" and pa.types.is_string(field.type):
            column = pa.chunked_array(
                [
                    pa.array([None if g is None else public_gold(g) for g in c.to_pylist()], pa.string())
                    for c in column.chunks
                ],
                type=pa.string(),
            )
        if pa.types.is_map(field.type):
            entries = pa.list_(
                pa.struct([pa.field("key", field.type.key_type), pa.field("value", field.type.item_type)])
            )
            column = pa.chunked_array(
                [pa.array(chunk.to_pylist(), type=entries) for chunk in column.chunks], type=entries
            )
            field = pa.field(field.name, entries, metadata=field.metadata)
        columns.append(column)
        fields.append(field)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a table cell ends at a bare pipe


def _scores_table(results: dict) -> list[str]:
    summary = results_json.summary_of(results) or {}
    lines = ["| category | n | mean | 95% CI | errors |", "|---|---:|---:|---|---:|"]
    blocks = [(b["category"], b) for b in summary.get("categories", [])]
    if summary.get("overall"):
        blocks.append(("**overall**", summary["overall"]))
    for name, b in blocks:
        ci = b.get("ci95")
        interval = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci and None not in ci else ""
        mean = "—" if b.get("mean") is None else f"{b['mean']:.3f}"
        lines.append(f"| {name} | {b.get('n', 0)} | {mean} | {interval} | {b.get('errors', 0)} |")
    return lines


def card_text(source: RunSource, schema: pa.Schema, splits: dict[str, tuple[int, int]]) -> str:
    """`splits`: name -> (rows, bytes in Arrow memory, as `datasets` counts them)."""
    run, dataset = source.run, source.run.get("dataset") or {}
    header = {
        "pretty_name": f"tsbench run {source.name}",
        "license": "apache-2.0",
        "tags": ["tsbench", "time-series", "llm-evaluation", source.family],
        "configs": [
            {"config_name": "default", "data_files": [{"split": s, "path": f"data/{s}-*.parquet"} for s in splits]}
        ],
        "dataset_info": {
            "config_name": "default",
            "features": features(schema),
            "splits": [{"name": s, "num_bytes": b, "num_examples": n} for s, (n, b) in splits.items()],
        },
    }
    overall = (results_json.summary_of(source.results) or {}).get("overall") or {}
    provenance = {
        "run": source.name,
        "model": source.model,
        "harness": run.get("harness"),
        "depth": run.get("depth"),
        "reference policy": run.get("reference"),
        "complete": run.get("complete"),
        "dataset key": dataset.get("key"),
        "dataset seed": dataset.get("seed"),
        "dataset split": dataset.get("split"),
        "dataset files (sha256)": dataset.get("file_sha256"),
        "git commit": run.get("git_commit"),
        "versions": run.get("versions"),
        "created": run.get("created_at"),
        "updated": run.get("updated_at"),
        "kernels without the jail": run.get("unsafe_sandbox"),
    }
    body = [
        f"# tsbench run `{source.name}`",
        "",
        f"{source.model} under the `{run.get('harness')}` harness on {dataset.get('key') or source.family}: "
        f"{overall.get('rows', len(source.samples))} rows (one per sample and epoch), "
        f"{overall.get('errors', 0)} of them errors (never scored, never a 0).",
        "",
        "## Scores",
        "",
        *_scores_table(source.results),
        "",
        "Means are over scored rows; intervals are 95 % bootstrap intervals of the mean.",
        "",
        "## Provenance",
        "",
        *[
            f"- **{k}**: `{json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}`"
            for k, v in provenance.items()
            if v is not None
        ],
        "",
        "## Config",
        "",
        "```json",
        json.dumps(run.get("config") or {}, indent=2, sort_keys=True),
        "```",
        "",
        "## Columns",
        "",
        "| column | type | description |",
        "|---|---|---|",
        *[f"| `{f.name}` | `{f.type}` | {_cell(DESCRIPTIONS.get(f.name, ''))} |" for f in schema],
        "",
        "`attributes` and `metrics` are lists of {key, value}; `gold`, `parsed_answer` and `transcript` "
        "are JSON text. `tsbench/run.json` and `tsbench/results.json` are the run's own files.",
        "",
    ]
    return "---\n" + dump(header) + "---\n\n" + "\n".join(body)


def write_hf_dataset(source: RunSource, out: Path) -> Path:
    """Write the dataset folder `out` (replacing an earlier export there); returns it."""
    out = Path(out)
    if (out / CARD).exists():
        check_replaceable(out, "run-export", "a run export", marker=f"tsbench/{RUN_JSON}", legacy=_legacy_export)
        shutil.rmtree(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    table = hf_table(to_table(source.rows()))
    split_names = [s if s else "test" for s in table.column("split").to_pylist()]
    splits: dict[str, tuple[int, int]] = {}
    for name in sorted(set(split_names)):
        mask = pa.array([s == name for s in split_names])
        part = table.filter(mask)
        pq.write_table(part, out / "data" / f"{name}-00000-of-00001.parquet")
        splits[name] = (part.num_rows, part.nbytes)
    if not splits:  # a run with no rows yet: an empty split keeps the folder loadable
        pq.write_table(table, out / "data" / "test-00000-of-00001.parquet")
        splits["test"] = (0, 0)
    (out / "tsbench").mkdir(exist_ok=True)
    for name in (RUN_JSON, RESULTS_JSON):
        if (source.path / name).is_file():
            shutil.copyfile(source.path / name, out / "tsbench" / name)
    (out / CARD).write_text(card_text(source, table.schema, splits), encoding="utf-8")
    record_owned(out, "run-export")
    return out


def _legacy_export(out: Path) -> str | None:
    """An export written before tsbench listed what it writes is ours when it holds nothing but its
    layout: README.md, data/*.parquet and tsbench/{run,results}.json, plain files all."""
    allowed = {CARD, "data", "tsbench"}
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out)
        if path.is_symlink():
            return f"{rel} is a symlink"
        top = rel.parts[0]
        if top not in allowed or len(rel.parts) > 2:
            return f"it holds {rel}, which no export writes"
        if len(rel.parts) == 1:
            if (top == CARD) != path.is_file():
                return f"{rel} is not what an export writes"
        elif (
            top == CARD
            or not path.is_file()
            or (path.suffix != ".parquet" if top == "data" else rel.name not in (RUN_JSON, RESULTS_JSON))
        ):
            return f"it holds {rel}, which no export writes"
    return None
