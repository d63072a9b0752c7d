"""Where bubblewrap cannot start, eval stops before any episode with one line saying why and how to
fix it; `--unsafe-sandbox` runs the weaker mode instead and says so in run.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import HarnessSettings
from tsbench.harness.runtime import SandboxError, check_jail
from tsbench.harness.runtime.jail import _preflight
from tsbench.testing import readiness

pytestmark = pytest.mark.timeout(300)

NO_USERNS = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
    "non-privileged user namespaces."
)


def _path_without_bwrap(tmp_path: Path, fake_bwrap: str | None = None) -> str:
    """A PATH with the tools the unsafe mode uses, and no (or a broken) bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("unshare", "setpriv", "nsenter", "sh", "true", "env"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    if fake_bwrap is not None:
        script = bin_dir / "bwrap"
        script.write_text(f"#!/bin/sh\necho '{fake_bwrap}' >&2\nexit 1\n")
        script.chmod(0o755)
    return str(bin_dir)


@pytest.fixture
def fresh_preflight():
    _preflight.cache_clear()
    yield
    _preflight.cache_clear()


def test_the_jail_starts_here(fresh_preflight):
    check_jail()


@pytest.mark.parametrize(
    "fake, reason", [(None, "not on PATH"), (NO_USERNS, "No permissions to creating new namespace")]
)
def test_preflight_says_why_in_one_line(tmp_path, monkeypatch, fresh_preflight, fake, reason):
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path, fake))
    with pytest.raises(SandboxError) as caught:
        check_jail()
    message = str(caught.value)
    assert "\n" not in message and reason in message
    assert "install bubblewrap" in message and "--unsafe-sandbox" in message


def _eval(small_data: Path, out: Path, path: str, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=path)
    cmd = [
        sys.executable,
        "-m",
        "tsbench.cli",
        "eval",
        "--model",
        "scripted/zscore",
        "--harness",
        "rlm",
        "--data",
        str(small_data),
        "--regime",
        "precise",
        "--categories",
        "localize",
        "--limit-per-category",
        "1",
        "--out",
        str(out),
        *extra,
    ]
    return readiness.run(cmd, text=True, env=env)


def test_eval_refuses_kernel_harnesses_without_the_jail_unless_unsafe(
    small_data, tmp_path, monkeypatch, fresh_preflight
):
    path = _path_without_bwrap(tmp_path)
    refused = _eval(small_data, tmp_path / "refused", path)
    assert refused.returncode == 2, refused.stderr[-2000:]
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot start the jail"), refused.stderr
    assert not (tmp_path / "refused").exists()  # stopped before any episode or run directory

    monkeypatch.setenv("PATH", path)
    cfg = EvalConfig(
        model="scripted/zscore",
        harness="rlm",
        data=[str(small_data)],
        regime="precise",
        categories=["localize"],
        limit_per_category=1,
        concurrency=1,
        out=str(tmp_path / "unsafe"),
        harness_config=HarnessSettings(unsafe_sandbox=True),
    )
    run_dir = run_eval(cfg)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["unsafe_sandbox"] is True and info["complete"] and info["error_samples"] == 0


def test_train_grpo_refuses_kernel_harnesses_without_the_jail(tmp_path, monkeypatch, fresh_preflight):
    """Training would otherwise run a whole step of sandbox-error episodes and learn from nothing."""
    pytest.importorskip("trl")
    from tsbench.core.config import build
    from tsbench.core.errors import UserError
    from tsbench.train.config import GRPOConfig
    from tsbench.train.grpo import train_grpo

    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    cfg = build(
        GRPOConfig,
        {
            "model": "local/never-loaded",
            "harness": "rlm",
            "group_size": 2,
            "batch_size": 2,
            "out": str(tmp_path / "run"),
        },
    )
    with pytest.raises(UserError, match="cannot start the jail"):
        train_grpo(cfg)
    assert not (tmp_path / "run").exists()


def test_a_virtualenv_under_tmp_stays_visible_inside_the_jail():
    """The jail mounts a private /tmp; a checkout made with mktemp keeps its venv under /tmp, so the
    interpreter's binds must come after that mount, not be hidden beneath it."""
    import site
    import tempfile

    src = Path(__file__).resolve().parents[1] / "src"
    with tempfile.TemporaryDirectory(prefix="tsb-venv-", dir="/tmp") as root:
        venv = Path(root) / "venv"
        readiness.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), *site.getsitepackages()])}
        probe = (
            "import sys; from tsbench.harness.runtime.jail import _preflight; "
            "assert sys.prefix.startswith('/tmp/'), sys.prefix; print(_preflight())"
        )
        done = readiness.run([str(venv / "bin" / "python"), "-c", probe], env=env, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "None"
