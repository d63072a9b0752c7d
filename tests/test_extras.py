"""A command whose extra is missing says which one to install, in one line, exit 2.

A missing package is simulated in a child process by a finder placed first on `sys.meta_path` that
answers "no module named ..." for it, so `import name` and `importlib.util.find_spec(name)` fail as for
a package that is not installed (a `sys.modules[name] = None` entry would confuse libraries that look
for an already-imported torch).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tsbench.core.extras import EXTRAS, MissingExtra, available, check, require
from tsbench.testing import readiness

ROOT = Path(__file__).resolve().parents[1]
BLOCKER = """
import sys

class Uninstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Uninstalled())
"""


def tsbench_without(blocked: list[str], *args: str) -> subprocess.CompletedProcess:
    code = BLOCKER.format(blocked=blocked) + (
        f"sys.argv = ['tsbench', *{list(args)!r}]\nfrom tsbench.cli import main\nmain()\n"
    )
    return readiness.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_require_imports_or_names_the_extra(tmp_path, monkeypatch):
    assert require("json", extra="local").dumps([1]) == "[1]"
    with pytest.raises(MissingExtra, match=r"pip install 'tsbench\[classical\]'") as caught:
        require("no_such_package_anywhere", extra="classical")
    assert caught.value.extra == "classical" and "\n" not in str(caught.value)
    with pytest.raises(MissingExtra, match="no_such_package_anywhere"):
        check("json", "no_such_package_anywhere.sub", extra="local")
    assert available("json") and not available("no_such_package_anywhere.sub")
    # An installed package that is itself broken keeps its own error: the extra is there.
    (tmp_path / "broken_pkg").mkdir()
    (tmp_path / "broken_pkg" / "__init__.py").write_text("import a_dependency_it_lacks\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="a_dependency_it_lacks"):
        require("broken_pkg", extra="local")


def test_every_extra_named_in_messages_exists_in_pyproject():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(extras), set(EXTRAS) - set(extras)
    assert "tsbench[" in " ".join(extras["all"])
    everything = extras["all"][0]
    for name in ("local", "classical", "train", "timeclaw", "ray", "inspect", "tracking"):
        assert name in everything
    assert "gpu" not in everything  # vllm needs a GPU; `make setup` installs [all] on any machine


@pytest.mark.parametrize(
    "blocked, args, extra",
    [
        (["torch"], ["eval", "--model", "local/smollm2-135m", "--harness", "single-pass-text"], "local"),
        (["statsmodels"], ["eval", "--model", "scripted/zscore", "--harness", "tools"], "timeclaw"),
        (["torch"], ["train-grpo", "--model", "local/smollm2-135m"], "train"),
        (["xgboost"], ["sft-baseline", "--model", "classical", "--data", "."], "classical"),
        (["chronos"], ["sft-baseline", "--model", "tslm/chatts", "--data", "."], "tslm"),
        (["inspect_ai"], ["export", "{run}", "--format", "inspect"], "inspect"),
        (["tensorboard"], ["eval", "--model", "scripted/zscore", "--report-to", "tensorboard"], "tracking"),
    ],
)
def test_a_missing_extra_is_one_line_and_exit_2(blocked, args, extra, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"run_name": "run", "model": "m", "harness": "rlm"}')
    res = tsbench_without(blocked, *[a.replace("{run}", str(run)) for a in args])
    assert res.returncode == 2, res.stderr[-2000:]
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith("error: ") and f"pip install 'tsbench[{extra}]'" in line, line


def test_the_base_commands_import_no_optional_package():
    """generate, eval, score, show, leaderboard and export hf|csv load none of the extras' packages."""
    code = (
        "import sys\nfrom tsbench.cli import app\n"
        "import tsbench.eval.runner, tsbench.leaderboard, tsbench.interop.hf_dataset, tsbench.interop.long_csv\n"
        "import tsbench.tasks.anomalyxl.generate, tsbench.harness.rlm, tsbench.harness.single_pass\n"
        "heavy = ['torch', 'transformers', 'xgboost', 'stumpy', 'numba', 'ruptures', 'statsmodels', 'trl', "
        "'peft', 'accelerate', 'tensorboard', 'wandb', 'inspect_ai', 'ray', 'vllm', 'datasets']\n"
        "print(' '.join(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    res = readiness.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == ""
