"""The dataset card of an exported benchmark folder: a YAML header `datasets` and the Hub read
(license, configs with their data files, typed features, split sizes) and a body saying what the
data is, how it was generated (the manifest's settings, seeds, versions, file hashes) and what to cite.

Licenses: a set tsbench generates from its own code (AnomalyXL, synthetic TimeSage, test families)
is under the project's Apache-2.0; a set derived from public recordings or released sources is
`other`, and the card says that the source's license applies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tsbench.interop.hf_features import features
from tsbench.interop.yaml_text import dump

GENERATED = {"anomalyxl", "trend"}  # families whose every row tsbench synthesises
TSBENCH_CITATION = """@software{tsbench,
  title = {tsbench: time-series benchmarks for language-model agents},
  author = {{tsbench contributors}},
  year = {2026},
  version = {VERSION},
  url = {https://pypi.org/project/tsbench/},
  note = {the generator and harnesses that wrote this dataset},
}"""
PAPERS = {
    "anomalyxl": """@misc{timerlm_anomalyxl,
  title = {TimeRLM: Recursive Language Models Enable Precise Anomaly Localization in
           Long-Context Time-Series},
  author = {{OpenTSLM}},
  year = {2026},
  url = {https://github.com/OpenTSLM/TimeRLM},
  note = {introduces the AnomalyXL benchmark; the paper's text names its code at this URL},
}""",
    "timesage": """@misc{yao2026timesageev,
  title = {TimeSage-EV: A Live Benchmark for Agentic Time Series Analysis in Evolving Environments},
  author = {Yao, Qingren and Kong, Yaxuan and Nie, Yuqi and Li, Yichen and Zohren, Stefan and
            Vettoruzzo, Anna and Wen, Qingsong and Jin, Ming and Vanschoren, Joaquin},
  year = {2026},
  eprint = {2608.14270},
  archivePrefix = {arXiv},
}""",
}
_NOT_SETTINGS = {"files", "versions", "git_commit", "dataset", "family", "splits", "counts", "audit"}


def license_of(manifest: dict) -> str:
    family = manifest.get("family") or "anomalyxl"
    if family in GENERATED:
        return "apache-2.0"
    if family == "timesage" and (manifest.get("source") or "synthetic") == "synthetic":
        return "apache-2.0"
    return "other"


def generator_settings(manifest: dict) -> dict[str, Any]:
    """What the generator was asked for: each split's config, or the manifest's own settings."""
    splits = manifest.get("splits")
    if isinstance(splits, dict) and splits:
        return {name: (entry or {}).get("config") for name, entry in splits.items()}
    if isinstance(manifest.get("config"), dict):
        return manifest["config"]
    return {k: v for k, v in manifest.items() if k not in _NOT_SETTINGS}


def _header(manifest: dict, placed: list, schemas: dict) -> dict[str, Any]:
    configs = sorted({item.config for item in placed}, key=lambda c: (c not in ("default", "precise"), c))
    order = {"train": 0, "validation": 1, "test": 2}
    by_config = {c: sorted((i for i in placed if i.config == c), key=lambda i: order.get(i.split, 3)) for c in configs}
    family = manifest.get("family") or "anomalyxl"
    return {
        "pretty_name": f"{manifest.get('dataset') or family} (tsbench, seed {manifest.get('seed')})",
        "license": license_of(manifest),
        "task_categories": ["question-answering"],
        "tags": ["tsbench", "time-series", "llm-evaluation", family],
        "configs": [
            {
                "config_name": c,
                **({"default": True} if c == configs[0] else {}),
                "data_files": [{"split": i.split, "path": i.target} for i in by_config[c]],
            }
            for c in configs
        ],
        "dataset_info": [
            {
                "config_name": c,
                "features": features(schemas[c]),
                "splits": [{"name": i.split, "num_bytes": i.num_bytes, "num_examples": i.rows} for i in by_config[c]],
                "download_size": sum(i.file_bytes for i in by_config[c]),
                "dataset_size": sum(i.num_bytes for i in by_config[c]),
            }
            for c in configs
        ],
    }


def data_card(manifest: dict, folder: Path, placed: list, schemas: dict) -> str:
    """The whole README.md: YAML front matter, then the body."""
    header = _header(manifest, placed, schemas)
    family = manifest.get("family") or "anomalyxl"
    name = manifest.get("dataset") or family
    hashes = {}
    for entry in (manifest.get("splits") or {}).values():
        hashes.update((entry or {}).get("files") or {})
    hashes.update(manifest.get("files") or {})
    first = header["configs"][0]["config_name"]
    license_line = (
        "Apache-2.0, as tsbench itself: every row is synthesised by its generator."
        if header["license"] == "apache-2.0"
        else "`other`: the rows are derived from public source data, whose own license and terms of use apply."
    )
    body = [
        f"# {name} (generated by tsbench)",
        "",
        f"The `{family}` task family's data, seed {manifest.get('seed')}, as `tsbench generate` wrote it in "
        f"`{folder.name}/`. Each file is copied byte for byte (unless listed as rewritten below); "
        "`tsbench/manifest.json` is the generator's manifest.",
        "",
        "```python",
        "import datasets",
        f"ds = datasets.load_dataset(PATH_TO_THIS_FOLDER)  # config {first!r}",
        *(f"ds = datasets.load_dataset(PATH_TO_THIS_FOLDER, {c['config_name']!r})" for c in header["configs"][1:]),
        "```",
        "",
        "## Configs and splits",
        "",
        "| config | split | rows | file | sha256 |",
        "|---|---|---:|---|---|",
        *[
            f"| {i.config} | {i.split} | {i.rows} | `{i.source.name}` | `{(hashes.get(i.source.name) or {}).get('sha256', '')}` |"
            for i in placed
        ],
        "",
        ("`validation` is tsbench's `val` split. " if any(i.split == "validation" for i in placed) else "")
        + "`gold` (the answer, as the prompt asks for it), `plan` and other text columns holding JSON are JSON text.",
        *(
            [
                "",
                "Rewritten, not copied (so their sha256 differs from the manifest's): "
                + ", ".join(f"`{i.source.name}`" for i in placed if i.converted)
                + ": map columns as lists of {key, value}, which `datasets` can read, and `gold` without the "
                "scorer's own keys (AnomalyXL's `_L` is the `length` column).",
            ]
            if any(i.converted for i in placed)
            else []
        ),
        "",
        "## Generator settings",
        "",
        "The settings each split was generated with (same seed and settings: identical file bytes):",
        "",
        "```json",
        json.dumps(generator_settings(manifest), indent=2, sort_keys=True, default=str),
        "```",
        "",
        "## Provenance",
        "",
        f"- **family**: `{family}`",
        f"- **seed**: `{manifest.get('seed')}`",
        f"- **git commit**: `{manifest.get('git_commit')}`",
        *([f"- **audit passed**: `{manifest['audit'].get('ok')}`"] if isinstance(manifest.get("audit"), dict) else []),
        f"- **versions**: `{json.dumps(manifest.get('versions') or {}, sort_keys=True)}`",
        "",
        "## License",
        "",
        license_line,
        "",
        "## Citation",
        "",
        "```bibtex",
        *([PAPERS[family], ""] if family in PAPERS else []),
        TSBENCH_CITATION.replace("VERSION", str((manifest.get("versions") or {}).get("tsbench", ""))),
        "```",
        "",
    ]
    return "---\n" + dump(header) + "---\n\n" + "\n".join(body)
