"""Every registered family, plugins included, honours `TaskFamily.generate`'s documented contract
(tasks/base.py): it writes files and returns one line per file with `file`, `rows`, `bytes` and `sha256`
(what `tsbench generate` prints), whose files `describe` reads into (title, frame) tables; or it refuses in
one line (a family that reads files you have, or has no generator). Run in one subprocess with the
test_plugins distribution installed, so its family is registered by entry point as a user's would be."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from test_plugins import ENTRY_POINTS, PLUGIN, install
from tsbench.testing import readiness

SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tsbench.core.errors import UserError
    from tsbench.tasks import FAMILIES, get_taskset

    SMALL = {"anomalyxl": {"preset": "small"}, "timesage": {"scenarios": 1, "periods": 2}}
    found = {}
    for name in FAMILIES.names():
        family = get_taskset(name)
        out = Path(sys.argv[1]) / name
        try:
            manifest, lines = family.generate({"seed": 42, **SMALL.get(name, {})}, out)
        except UserError as error:
            found[name] = {"refused": str(error)}
            continue
        files = [Path(manifest).parent / line["file"] for line in lines]
        tables = family.describe(files)
        found[name] = {
            "lines": lines,
            "files": [[str(f), f.stat().st_size] for f in files],
            "tables": [[title, type(frame).__name__, len(frame)] for title, frame in tables],
        }
    print(json.dumps(found))
""")


def test_every_registered_family_generates_and_describes_by_its_contract(tmp_path):
    (tmp_path / "site").mkdir()
    site = install(tmp_path / "site", "tsb-spikes-plugin", {"tsb_spikes_plugin": PLUGIN}, ENTRY_POINTS)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    done = readiness.run([sys.executable, "-c", SCRIPT, str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "spikes" in found and {"anomalyxl", "trend", "timesage"} <= set(found)
    for name, what in found.items():
        if "refused" in what:
            assert what["refused"] and "\n" not in what["refused"], name
            continue
        assert what["lines"] and len(what["lines"]) == len(what["files"]), name
        for line, (path, size) in zip(what["lines"], what["files"]):
            assert isinstance(line["rows"], int) and line["rows"] > 0, (name, line)
            assert line["bytes"] == size and Path(path).name == line["file"], (name, line)
            assert isinstance(line["sha256"], str) and len(line["sha256"]) == 64, (name, line)
        assert what["tables"] and all(kind == "DataFrame" and n > 0 for _, kind, n in what["tables"]), name
    generated = {name for name, what in found.items() if "lines" in what}
    assert {"anomalyxl", "trend", "timesage"} <= generated  # the families that need no files of yours
