"""The house rules of spec/architecture.md, checked on the code itself."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

from tsbench.testing import readiness

SRC = Path(__file__).resolve().parents[1] / "src" / "tsbench"


def test_import_contracts_hold():
    """import-linter's contracts in pyproject.toml (the "Never" rules) are all kept."""
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        pytest.fail("lint-imports is not installed (it is in the dev extra)")
    res = readiness.run([lint], capture_output=True, text=True, cwd=SRC.parents[1])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-1000:]
    assert "0 broken" in res.stdout


def _targets():
    """Every module a registry loads by name: import-linter cannot see these edges."""
    from tsbench import baselines, harness, tasks
    from tsbench.eval import executors

    yield "tsbench.tasks", [t.split(":")[0] for t in tasks.BUILTIN.values()]
    yield "tsbench.harness", [module for module, _, _ in harness.HARNESSES.values()]
    yield "tsbench.baselines", [module for module, _, _ in baselines.POLICIES.values()]
    yield "tsbench.eval.executors", [t.split(":")[0] for t in executors.EXECUTORS.values()]


@pytest.mark.parametrize("package, modules", list(_targets()), ids=lambda v: v if isinstance(v, str) else "")
def test_registries_load_only_their_own_package(package, modules):
    """Loading by name never reaches up or sideways: each registry's targets live in its package."""
    assert modules
    for module in modules:
        assert module.startswith(package + "."), f"{package} registry loads {module}"
        if not module.endswith(".ray"):  # ray is an optional extra
            importlib.import_module(module)


def test_no_source_file_is_over_about_600_lines():
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > 650}
    assert not long, long


def test_every_harness_setting_is_a_config_key():
    """Each harness's own settings (and the shared ones) are accepted as flat [eval] keys once it is chosen,
    and land in its settings object."""
    from tsbench.core.config import build
    from tsbench.core.errors import UserError
    from tsbench.core.settings import specs
    from tsbench.eval.config import EvalConfig
    from tsbench.harness import HARNESSES, get_harness

    for name in HARNESSES:
        for spec in specs(get_harness(name).settings_class):  # a value of the declared type, inside its bounds
            value = spec.default if spec.default is not None else {int: 0, float: 0.5, str: ""}.get(spec.base, False)
            changed = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: v + 0.5, str: lambda v: v + "x"}
            new = changed[spec.base](value)
            if spec.meta.get("choices"):
                new = next(c for c in spec.meta["choices"] if c != spec.default)
            cfg = build(EvalConfig, {"model": "m", "harness": name, spec.name: new})
            assert getattr(cfg.harness_config, spec.name) == new, (name, spec.name)
    with pytest.raises(UserError, match="no_such_key"):
        build(EvalConfig, {"model": "m", "no_such_key": 1})


def test_every_module_imports():
    """A renamed helper must not leave a module that only fails when someone runs it (a bench, a
    CLI path no test takes): import them all, as `make setup` installs them."""
    import importlib
    import pkgutil

    import tsbench

    failed = {}
    for module in pkgutil.walk_packages(tsbench.__path__, "tsbench."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, whatever its type
            failed[module.name] = repr(exc)[:200]
    assert failed == {}
