"""Every file README.md and docs/*.md cite exists (issue 46: the docs named train/vision_trainer.py and
timesage_figures.py long after they went). A cited path may be written from the repository root, from
src/ or src/tsbench/, or from a package (`sources/issuer.py` in docs/timesage.md); a bare `name.py` must be
some file's name. Other projects' files, cited as the source of a fact, are listed in EXTERNAL by hand."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = {".git", ".venv", "__pycache__", "node_modules"}
OUTPUTS = {"data", "results", "runs"}  # what commands write at the top, not files the docs may cite
PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|toml|json|ya?ml|txt|sh))\b")
BARE = re.compile(r"`([\w.-]+\.py)`")
# Not ours: the binding specs beside the repository (shared/spec) and the papers' public code, named as
# the source of what tsbench reproduces.
EXTERNAL_PREFIXES = (
    "spec/",
    "evaluation/",
    "timeclaw/evaluation/",
    "verl/",
    "ray/",
    "scripts/compute_rcrps",
    "gt_source/",
)
EXTERNAL_NAMES = {
    "backtest.py",
    "ctu.py",
    "emg_soft.py",
    "gen_eval.py",
    "gen_eval_mc.py",
    "get_pkl.py",
    "static_query_CodeAct_mc.py",
    "static_query_codeact.py",
    "ts.py",
}


def _files() -> list[str]:
    found = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.is_file() and not SKIP & set(parts) and parts[0] not in OUTPUTS:
            found.append("/".join(parts))
    return found


def test_every_file_the_docs_cite_exists():
    files = _files()
    names = {f.rsplit("/", 1)[-1] for f in files}
    missing = []
    for doc in DOCS:
        text = doc.read_text()
        for cited in sorted(set(PATH.findall(text))):
            cited = cited.removeprefix("./")
            if cited.startswith(EXTERNAL_PREFIXES) or cited.startswith("../"):
                continue
            if not any(f == cited or f.endswith("/" + cited) for f in files):
                missing.append(f"{doc.name}: {cited}")
        for name in sorted(set(BARE.findall(text)) - EXTERNAL_NAMES):
            if name not in names:
                missing.append(f"{doc.name}: {name}")
    assert not missing, missing
    assert len(DOCS) > 3
