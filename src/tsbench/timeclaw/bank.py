"""The episodic memory bank (paper §3.4, Appendix C): records in parquet, two-stage retrieval.

A record m = (task, psi, phi, trajectory, rationale): the task's id, family (category), regime and
shape; its 20-feature fingerprint psi (the variant it was computed with is in `fingerprint`, and a
query's psi is computed the same way); its context embedding phi (absent when built with no
encoder); the trajectory (tool calls or code cells with their observations, never the final
answer); a short rationale; and `summary`, the text injected as a precedent.

Retrieval (Appendix C):
* bank-level z-scoring of psi with the bank's own per-feature mean and (population) std; a
  feature whose std is below 1e-9 is constant in the bank and gets std 1, so it normalises to 0;
  recomputed on every fresh load, never stored;
* stage 1: the top N = 20 records by cosine(phi_q, phi_m) among records that have a phi
  (records without one are skipped there); when the query has no phi the stage is skipped;
* stage 2: the top k = 3 of that pool by L2 distance between normalised fingerprints;
  ties keep the stage-1 order;
* filters: family (only the query's category) and self-exclusion. Self-exclusion here drops the
  query's own id and any record whose psi equals the query's exactly, i.e. the same series (an
  MCQ row and the precise row it was projected from share one series but not one id).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tsbench.core.input_budget import Budget, check_parquet
from tsbench.timeclaw.fingerprint import DEFAULT_VARIANT, DIM, fingerprint, series_lengths

LEGACY_VARIANT = "paper"  # banks written before the column was added hold the paper reading's psi
STD_FLOOR = 1e-9
POOL_N = 20
TOP_K = 3
MEMORY_HEADER = (
    "Precedents from memory: similar tasks solved earlier, with how they were analysed. Their final answers "
    "are withheld; use them as guidance on how to analyse this series, not as answers."
)

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("source_id", pa.string()),
        ("family", pa.string()),  # the task's category (the retrieval family filter compares it)
        ("regime", pa.string()),
        ("length", pa.int64()),
        ("n_channels", pa.int64()),
        ("descriptor", pa.string()),  # c_tau, the text phi embeds
        ("psi", pa.list_(pa.float64())),
        ("phi", pa.list_(pa.float32())),  # null: no embedding (skipped in stage 1)
        ("embedder", pa.string()),
        ("fingerprint", pa.string()),  # the psi variant (fingerprint.VARIANTS); null: a bank from before it, "paper"
        ("trajectory", pa.string()),  # JSON list of steps: tool calls / code cells and their observations
        ("rationale", pa.string()),
        ("summary", pa.string()),  # what a retrieval injects; never the final answer
        ("score", pa.float64()),
        ("model", pa.string()),
        ("harness", pa.string()),
        ("run", pa.string()),
        ("created_at", pa.string()),
    ]
)
COLUMNS = [f.name for f in SCHEMA]


@dataclass
class Precedent:
    id: str
    family: str
    summary: str
    rationale: str
    score: float
    cosine: float | None
    distance: float


class MemoryBank:
    def __init__(self, records: pd.DataFrame | list[dict[str, Any]], path: str | None = None):
        frame = pd.DataFrame(records)
        for column in COLUMNS:
            if column not in frame:
                frame[column] = None
        self.records = frame[COLUMNS].reset_index(drop=True)
        self.path = path
        self.psi = (
            np.array([np.asarray(p, dtype=np.float64) for p in self.records["psi"]]).reshape(len(self.records), -1)
            if len(self.records)
            else np.zeros((0, DIM))
        )
        if self.psi.shape[1] != DIM:
            raise ValueError(f"bank fingerprints have {self.psi.shape[1]} features, expected {DIM}")
        self.has_phi = np.array([p is not None and len(p) > 0 for p in self.records["phi"]], dtype=bool)
        dims = {len(p) for p, ok in zip(self.records["phi"], self.has_phi) if ok}
        if len(dims) > 1:
            raise ValueError(f"bank embeddings have mixed dimensions {sorted(dims)}")
        self.phi_dim = dims.pop() if dims else 0
        self.phi = np.zeros((len(self.records), self.phi_dim), dtype=np.float32)
        for row, (vector, ok) in enumerate(zip(self.records["phi"], self.has_phi)):
            if ok:
                v = np.asarray(vector, dtype=np.float32)
                self.phi[row] = v / max(float(np.linalg.norm(v)), 1e-12)
        self.mean, self.std = bank_scaler(self.psi)
        variants = {v or LEGACY_VARIANT for v in self.records["fingerprint"]}
        if len(variants) > 1:
            raise ValueError(f"bank fingerprints mix variants {sorted(variants)}; rebuild the bank")
        self.fingerprint_variant = variants.pop() if variants else DEFAULT_VARIANT

    def __len__(self) -> int:
        return len(self.records)

    @property
    def embedder(self) -> str:
        names = [e for e, ok in zip(self.records["embedder"], self.has_phi) if ok and e]
        return names[0] if names else "none"

    # -- storage --------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> MemoryBank:
        check_parquet(path, str(path), Budget().scaled())  # --memory-bank may be anyone's file
        table = pq.read_table(path)
        return cls(table.to_pylist(), path=str(path))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = self.records.to_dict("records")
        for row in rows:
            row["psi"] = [float(v) for v in row["psi"]]
            row["phi"] = None if row["phi"] is None or len(row["phi"]) == 0 else [float(v) for v in row["phi"]]
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        staging = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, staging)
        os.replace(staging, path)
        return path

    # -- retrieval ------------------------------------------------------------------------------
    def normalise(self, psi: np.ndarray) -> np.ndarray:
        return (np.asarray(psi, dtype=np.float64) - self.mean) / self.std

    def retrieve(
        self,
        psi: np.ndarray,
        phi: np.ndarray | None = None,
        *,
        top_k: int = TOP_K,
        pool: int = POOL_N,
        family: str | None = None,
        exclude_id: str | None = None,
        exclude_psi: np.ndarray | None = None,
    ) -> list[Precedent]:
        """Two-stage top-k: cosine on phi for a pool of N, then L2 on normalised psi."""
        if top_k <= 0 or not len(self):
            return []
        candidates = np.arange(len(self))
        if family is not None:
            candidates = candidates[(self.records["family"].to_numpy() == family)[candidates]]
        if exclude_id is not None:
            candidates = candidates[(self.records["id"].to_numpy() != exclude_id)[candidates]]
        if exclude_psi is not None:
            same = np.all(
                np.isclose(
                    self.psi[candidates], np.asarray(exclude_psi, dtype=np.float64)[None, :], rtol=0.0, atol=1e-12
                ),
                axis=1,
            )
            candidates = candidates[~same]
        cosines: dict[int, float] = {}
        if phi is not None:
            query = np.asarray(phi, dtype=np.float32).ravel()
            if self.phi_dim and query.shape[0] != self.phi_dim:
                raise ValueError(
                    f"query embedding has {query.shape[0]} dims, the bank's have {self.phi_dim} "
                    f"(built with {self.embedder})"
                )
            query = query / max(float(np.linalg.norm(query)), 1e-12)
            candidates = candidates[self.has_phi[candidates]]
            similarity = self.phi[candidates] @ query if len(candidates) else np.zeros(0)
            order = np.argsort(-similarity, kind="stable")[:pool]
            candidates = candidates[order]
            cosines = {int(i): float(s) for i, s in zip(candidates, similarity[order])}
        if not len(candidates):
            return []
        distances = np.linalg.norm(self.normalise(self.psi[candidates]) - self.normalise(psi)[None, :], axis=1)
        order = np.argsort(distances, kind="stable")[:top_k]
        found = []
        for position in order:
            row = int(candidates[position])
            record = self.records.iloc[row]
            found.append(
                Precedent(
                    id=str(record["id"]),
                    family=str(record["family"]),
                    summary=str(record["summary"] or ""),
                    rationale=str(record["rationale"] or ""),
                    score=float(record["score"] or 0.0),
                    cosine=cosines.get(row),
                    distance=float(distances[position]),
                )
            )
        return found


def bank_scaler(psi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and std of the bank's fingerprints; std < 1e-9 -> 1 (the feature drops out)."""
    if not len(psi):
        return np.zeros(DIM), np.ones(DIM)
    mean = psi.mean(axis=0)
    std = psi.std(axis=0)
    std = np.where(std < STD_FLOOR, 1.0, std)
    return mean, std


_banks: dict[str, tuple[tuple[int, int], MemoryBank]] = {}
_banks_lock = threading.Lock()


def load_bank(path: str | Path) -> MemoryBank:
    """MemoryBank.load, cached per process until the file changes (the scaler is recomputed then)."""
    key = str(Path(path).resolve())
    stat = os.stat(key)
    stamp = (stat.st_mtime_ns, stat.st_size)
    with _banks_lock:
        cached = _banks.get(key)
        if cached is None or cached[0] != stamp:
            cached = (stamp, MemoryBank.load(key))
            _banks[key] = cached
        return cached[1]


def render_precedents(precedents: list[Precedent]) -> str:
    """The prompt prefix: a header and one numbered summary per precedent (answers are not in them)."""
    if not precedents:
        return ""
    lines = [MEMORY_HEADER]
    lines += [f"[{index}] {p.summary}" for index, p in enumerate(precedents, 1)]
    return "\n".join(lines)


def recall(
    bank_path: str | Path,
    *,
    row_id: str,
    category: str,
    regime: str,
    question: str,
    channel_names: list[str],
    values,
    options: list[str] | None = None,
    timestamps=None,
    meta: dict | None = None,
    descriptor: str | None = None,
    top_k: int = TOP_K,
    pool: int = POOL_N,
    family_filter: bool = False,
    exclude_self: bool = True,
    embedder: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """Retrieve precedents for one task: (prompt prefix, transcript event). `timestamps` (seconds) feed
    the fingerprint's irregular-sampling feature and `meta` its channel lengths (the query's psi is
    computed as the bank's was); `descriptor` is the family's c_tau (Appendix C), which replaces the
    generic one built from the other fields."""
    from tsbench.timeclaw.embed import context_descriptor, get_embedder

    bank = load_bank(bank_path)
    psi = fingerprint(values, timestamps, lengths=series_lengths(values, meta), variant=bank.fingerprint_variant)
    name = embedder or bank.embedder
    phi = None
    if name != "none" and bank.has_phi.any():
        encoder = get_embedder(name)
        if encoder is not None:
            text = context_descriptor(category, regime, channel_names, question, options, descriptor=descriptor)
            phi = encoder.embed([text])[0]
    precedents = bank.retrieve(
        psi,
        phi,
        top_k=top_k,
        pool=pool,
        family=category if family_filter else None,
        exclude_id=row_id if exclude_self else None,
        exclude_psi=psi if exclude_self else None,
    )
    event = {
        "role": "memory",
        "bank": str(bank_path),
        "embedder": name if phi is not None else "none",
        "top_k": top_k,
        "pool": pool,
        "precedents": [
            {"id": p.id, "family": p.family, "score": p.score, "cosine": p.cosine, "distance": round(p.distance, 6)}
            for p in precedents
        ],
    }
    return render_precedents(precedents), event


def trajectory_steps(transcript: list[dict[str, Any]], *, max_chars: int = 400) -> list[dict[str, Any]]:
    """The actions and observations of an episode transcript, without any assistant text (so
    without the final answer): tool calls (tools harness) or code cells (rlm)."""
    steps: list[dict[str, Any]] = []
    for event in transcript:
        if event.get("role") != "tool":
            continue
        observation = str(event.get("observation", ""))[:max_chars]
        if "name" in event:
            steps.append(
                {
                    "tool": event["name"],
                    "arguments": event.get("arguments"),
                    "observation": observation,
                    "error": bool(event.get("error")),
                }
            )
        else:
            cells = event.get("cells") or []
            for index, cell in enumerate(cells):
                steps.append(
                    {
                        "code": str(cell.get("code", ""))[:max_chars],
                        "observation": observation if index == len(cells) - 1 else "",
                    }
                )
    return steps


def _step_text(step: dict[str, Any], chars: int) -> str:
    if "tool" in step:
        arguments = step.get("arguments")
        args = ", ".join(f"{k}={json.dumps(v)}" for k, v in arguments.items()) if isinstance(arguments, dict) else ""
        head = f"{step['tool']}({args})"
    else:
        first = next((line for line in step.get("code", "").splitlines() if line.strip()), "")
        head = f"code `{first.strip()[:80]}`"
    observation = " ".join(str(step.get("observation", "")).split())
    return f"{head} -> {observation[:chars]}" if observation else head


def make_rationale(family: str, n_channels: int, length: int, score: float, steps: list[dict[str, Any]]) -> str:
    """A short, transferable rationale from the trajectory alone (the tools used, in order)."""
    used: list[str] = []
    for step in steps:
        name = step.get("tool") or "python code"
        if not step.get("error") and name not in used:
            used.append(name)
    if not steps:
        how = "answered directly from the data in the prompt"
    else:
        how = f"worked through {len(steps)} step(s) using {', '.join(used) or 'no successful call'}"
        how += f"; the decisive evidence came from the last {'call' if 'tool' in steps[-1] else 'cell'}"
    return f"A {family} question on {n_channels} channel(s) of length {length} was solved (score {score:.2f}): {how}."


def make_summary(
    family: str,
    n_channels: int,
    length: int,
    score: float,
    rationale: str,
    steps: list[dict[str, Any]],
    *,
    max_steps: int = 6,
    step_chars: int = 160,
) -> str:
    """The precedent text a retrieval injects: task shape, rationale, the steps (no final answer)."""
    shown = steps[:max_steps]
    lines = [
        f"{family} task, {n_channels} channel(s), L = {length}; solved with score {score:.2f}.",
        f"Rationale: {rationale}",
    ]
    if shown:
        lines.append(
            "Steps: "
            + " | ".join(_step_text(s, step_chars) for s in shown)
            + (f" | ... ({len(steps) - max_steps} more)" if len(steps) > max_steps else "")
        )
    return "\n    ".join(lines)
