"""Attacks 2 and 3 of issue 12, through `tsbench eval` against a loopback OpenAI-compatible server:
model code hunts for the gold (the host's command line, the dataset parquet, this run's and another
run's samples.jsonl, a gold file planted on the host) and for host secrets (/etc/shadow, /root).
Judged from the host side: the planted tokens never reach a transcript, the scores equal those of
the same final answers given without any attack, and the run completes."""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path

import pandas as pd
import pytest

from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import HarnessSettings
from tsbench.harness.runtime.jail import interpreter_paths
from tsbench.results import schema
from tsbench.testing.fake_openai_server import FakeOpenAIServer

pytestmark = pytest.mark.timeout(300)

FINAL = 'ok:The anomaly spans {"answer": [100, 140]}'

HUNT = """
import os, sys
hits, blocked = [], []
software = ('/proc', '/dev', '/usr', '/sys', sys.prefix, sys.base_prefix)  # read-only interpreter binds
for pid in sorted(p for p in os.listdir('/proc') if p.isdigit()):
    try:
        cmdline = open('/proc/%s/cmdline' % pid, 'rb').read()
    except OSError:
        continue
    if b'--data' in cmdline or b'pytest' in cmdline:
        hits.append(('cmdline', pid, cmdline[:200]))
for path in {targets!r}:
    try:
        data = sorted(os.listdir(path)) if os.path.isdir(path) else open(path, 'rb').read(4000)
        hits.append((path, data))
    except OSError as exc:
        blocked.append(path)
found = []
for top in ('/', '/tmp', '/work', '/root', '/home', '/sandbox', '/opt', '/var', '/mnt', '/srv'):
    for folder, subdirs, names in os.walk(top):
        subdirs[:] = [d for d in subdirs if os.path.join(folder, d) not in software]
        if folder.count('/') > 8:
            subdirs[:] = []
        found += [os.path.join(folder, n) for n in names if n.endswith(('.parquet', '.jsonl')) or 'gold' in n]
for path in sorted(set(found)):
    try:
        hits.append((path, open(path, 'rb').read(4000)))
    except OSError:
        pass
print('HITS', repr(hits))
print('BLOCKED', repr(blocked))
"""


def _on_the_way_to_the_interpreter(path: str, listing) -> bool:
    """A directory the jail holds only as a parent of a read-only interpreter bind (e.g. /root for
    a pyenv prefix under /root): its listing names nothing but the next step to that bind."""
    steps = set()
    for bound in interpreter_paths():
        if bound.startswith(path.rstrip("/") + "/"):
            steps.add(bound[len(path.rstrip("/")) + 1 :].split("/")[0])
    return isinstance(listing, list) and bool(steps) and set(listing) <= steps


def _attack(targets: list[str]) -> str:
    return "ok:Let me look around.\n```python\n" + HUNT.format(targets=targets).strip() + "\n```"


def _run(small_data: Path, out: Path, script: list[str], monkeypatch) -> pd.DataFrame:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with FakeOpenAIServer(script) as server:
        cfg = EvalConfig(
            model="openai/fake-model",
            base_url=server.base_url,
            harness="rlm",
            data=[str(small_data)],
            regime="precise",
            categories=["localize"],
            limit_per_category=2,
            concurrency=1,
            out=str(out),
            harness_config=HarnessSettings(max_turns=4, cell_timeout_s=120),
        )
        run_eval(cfg)
    info = json.loads((out / schema.RUN_JSON).read_text())
    assert info["complete"] and info["unsafe_sandbox"] is False  # the run continued to its end
    return pd.read_parquet(out / schema.SAMPLES).sort_values("id").reset_index(drop=True)


def test_model_code_cannot_reach_the_gold_or_host_secrets(small_data, tmp_path, monkeypatch):
    gold_token, other_token = f"GOLD-{uuid.uuid4().hex}", f"OTHER-RUN-{uuid.uuid4().hex}"
    planted = tmp_path / "planted" / "gold.json"
    planted.parent.mkdir()
    planted.write_text(json.dumps({"gold": gold_token}))
    other_run = tmp_path / "results" / "other-run"
    other_run.mkdir(parents=True)
    (other_run / schema.JOURNAL).write_text(json.dumps({"id": "x", "gold": other_token}) + "\n")
    out = tmp_path / "results" / "attacked"
    targets = [str(p) for p in sorted(small_data.glob("*.parquet"))] + [
        str(small_data),
        str(planted),
        str(other_run / schema.JOURNAL),
        str(out / schema.JOURNAL),
        str(out),
        "/etc/shadow",
        "/etc/gshadow",
        "/root",
        "/root/.ssh",
        "/root/.cache",
        str(Path.home()),
    ]
    attacked = _run(small_data, out, [_attack(targets), FINAL] * 2, monkeypatch)
    assert attacked["error_type"].isna().all(), attacked["error"].dropna().tolist()
    for transcript in attacked["transcript"]:
        observation = next(e["observation"] for e in json.loads(transcript) if e["role"] == "tool")
        hits = ast.literal_eval(observation.split("HITS ", 1)[1].split("\nBLOCKED", 1)[0])
        blocked = ast.literal_eval(observation.split("BLOCKED ", 1)[1].strip())
        assert all(_on_the_way_to_the_interpreter(*hit) for hit in hits), hits
        assert set(blocked) | {hit[0] for hit in hits} == set(targets)
        assert {str(planted), str(out / schema.JOURNAL), str(other_run / schema.JOURNAL), "/etc/shadow"} <= set(blocked)
        assert gold_token not in transcript and other_token not in transcript

    plain = _run(small_data, tmp_path / "results" / "plain", [FINAL] * 2, monkeypatch)
    assert attacked["id"].tolist() == plain["id"].tolist()
    assert attacked["score"].tolist() == plain["score"].tolist()  # the attack bought nothing
