"""Where a family's generated data is when the default folder has none: `generate --out data/small`
writes data/small/seed42/, and the next command (looking in data/<family>/seed42/) should say so
instead of pointing at the paper-size generate."""

from __future__ import annotations

from pathlib import Path

from tsbench.core import json_input

SEARCH_ROOT = Path("data")
MAX_FOUND = 3


def generated_sets(family: str, names: list[str], root: Path = SEARCH_ROOT) -> list[Path]:
    """Seed folders up to two levels under `root` whose manifest is `family`'s and which hold `names`."""
    if not root.is_dir():
        return []
    found = []
    for manifest in sorted(root.glob("*/seed*/manifest.json")) + sorted(root.glob("*/*/seed*/manifest.json")):
        try:
            owner = json_input.read_json(manifest).get("family")
        except (OSError, ValueError, AttributeError):
            continue
        folder = manifest.parent
        if owner == family and all((folder / name).is_file() for name in names):
            found.append(folder)
    return found[:MAX_FOUND]


def missing_data_hint(family: str, names: list[str], create: str) -> str:
    """`(pass --data DIR)` for sets found elsewhere under data/, else `(create it with: ...)`."""
    found = generated_sets(family, names)
    if found:
        listed = " or ".join(f"--data {folder}" for folder in found)
        return f"(generated data found elsewhere: pass {listed})"
    return f"(create it with: {create})"
