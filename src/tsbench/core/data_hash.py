"""The one short hash that names a generated split's bytes, printed beside every board that uses it.

It is taken over the manifest's file entries (file name -> sha256), which run.json copies as
`dataset.file_sha256`: the same files give the same hash on any machine, whatever the commit or
library versions the manifest also records, and a regenerated split with other seeds differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping


def split_hash(file_sha256: Mapping[str, str]) -> str:
    """12 hex digits of sha256 over the sorted {file name: sha256} of a split's files."""
    if not file_sha256:
        return ""
    text = json.dumps({str(k): str(v) for k, v in file_sha256.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def manifest_split_hash(manifest: Mapping, split: str) -> str:
    """split_hash of one split as its manifest.json records it ("" when the split is not there)."""
    files = (manifest.get("splits") or {}).get(split, {}).get("files") or {}
    return split_hash({name: entry.get("sha256", "") for name, entry in files.items()})
