"""`tsbench export DATA_DIR --format hf`: a generated benchmark as a folder `datasets.load_dataset`
reads offline, with a card whose header types every column and names every config's files."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from test_board_console import _pty_run
from tsbench.core.errors import UserError
from tsbench.testing import readiness

datasets = pytest.importorskip("datasets")
yaml = pytest.importorskip("yaml")

TSBENCH = [sys.executable, "-m", "tsbench.cli"]


def run(*args: str) -> subprocess.CompletedProcess:
    return readiness.run([*TSBENCH, *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path, str]:
    """A tiny `--preset small` set (all three splits) exported from its generate root (the seed dir is found)."""
    root = tmp_path_factory.mktemp("hfdata") / "small"
    res = run(
        "generate",
        "--preset",
        "small",
        "--seed",
        "3",
        "--split",
        "all",
        "--train-rows",
        "8",
        "--val-rows",
        "8",
        "--out",
        str(root),
    )
    assert res.returncode == 0, res.stderr
    shown = _pty_run([*TSBENCH, "export", str(root), "--format", "hf"], 200)  # in a terminal: with its bar
    return root / "seed3", root / "seed3-hf", shown


def cli(*args: str):
    """The command in this process: a subprocess costs seconds of imports on a busy machine."""
    from typer.testing import CliRunner

    from tsbench.cli import app

    return CliRunner().invoke(app, list(args))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_export_writes_a_folder_load_dataset_reads_offline(exported, tmp_path, monkeypatch):
    data, folder, shown = exported
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    assert "wrote" in plain and "load_dataset" in plain and "seed3-hf" in plain, plain
    assert "export seed3" in plain and "6/6" in plain  # the progress bar: six files copied
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    precise = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "cache"))  # the default config
    coarse = datasets.load_dataset(str(folder), "coarse", cache_dir=str(tmp_path / "cache"))
    manifest = json.loads((data / "manifest.json").read_text())
    files = {**manifest["splits"]["test"]["files"], **manifest["splits"]["val"]["files"]}
    assert set(precise) == set(coarse) == {"train", "validation", "test"}
    assert precise["test"].num_rows == files["test-precise.parquet"]["rows"]
    assert coarse["validation"].num_rows == files["val-coarse.parquet"]["rows"]
    assert precise["test"].features == datasets.Features.from_arrow_schema(
        pq.read_schema(data / "test-precise.parquet")
    )
    first = precise["test"][0]
    source = pq.read_table(data / "test-precise.parquet").slice(0, 1).to_pylist()[0]
    assert first["id"] == source["id"] and first["values"][0][:5] == pytest.approx(source["values"][0][:5])
    # byte-for-byte copies where nothing needs rewriting: the manifest's hashes still verify them
    assert _sha(folder / "data/coarse/test-00000-of-00001.parquet") == files["test-coarse.parquet"]["sha256"]
    # the precise gold is the answer as asked, without the scorer's `_L` (which is the `length` column)
    golds = [json.loads(g) for g in precise["test"]["gold"]]
    assert golds and not any(k.startswith("_") for g in golds for k in g) and "start" in golds[0]
    assert "`test-precise.parquet`" in (folder / "README.md").read_text().split("Rewritten, not copied")[1]


def test_card_header_types_features_names_files_and_carries_license_citation_settings(exported):
    data, folder, _ = exported
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n")
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["license"] == "apache-2.0"
    configs = {c["config_name"]: c for c in header["configs"]}
    assert set(configs) == {"precise", "coarse"} and configs["precise"].get("default") is True
    assert {"split": "validation", "path": "data/coarse/validation-00000-of-00001.parquet"} in configs["coarse"][
        "data_files"
    ]
    info = {i["config_name"]: i for i in header["dataset_info"]}
    types = {f["name"]: f for f in info["precise"]["features"]}
    assert types["values"] == {"name": "values", "list": {"list": "float32"}}
    assert types["length"]["dtype"] == "int32" and types["options"]["list"] == "string"
    schema = pq.read_schema(data / "test-precise.parquet")
    assert info["precise"]["features"] == datasets.Features.from_arrow_schema(schema)._to_yaml_list()
    splits = {s["name"]: s["num_examples"] for s in info["coarse"]["splits"]}
    assert splits["test"] == pq.read_metadata(data / "test-coarse.parquet").num_rows
    body = card.split("---\n", 2)[2]
    manifest = json.loads((data / "manifest.json").read_text())
    settings = json.loads(body.split("## Generator settings")[1].split("```json\n")[1].split("```")[0])
    assert settings["test"] == manifest["splits"]["test"]["config"] and settings["test"]["preset"] == "small"
    assert "## Citation" in body and "@misc{timerlm_anomalyxl" in body and "AnomalyXL" in body
    for entry in body.split("```bibtex")[1].split("```")[0].split("\n\n"):  # every BibTeX entry: who, where, when
        assert "author = {" in entry and "url = {" in entry and "year = {2026}" in entry, entry
    assert "`validation` is tsbench's `val` split" in body  # this export has one
    assert "## License" in body and json.loads((folder / "tsbench" / "manifest.json").read_text()) == manifest


def test_a_second_export_replaces_the_first_and_bad_targets_are_one_line(exported, tmp_path):
    data, folder, _ = exported
    stale = folder / "data" / "stale" / "test-00000-of-00001.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    from tsbench.core.own_folder import record_owned

    record_owned(folder, "data-export")  # a split an earlier export wrote (what it wrote is listed)
    res = cli("export", str(data), "--format", "hf", "--out", str(folder))
    assert res.exit_code == 0, res.output
    assert not stale.exists()
    for args, message in (
        ([str(data), "--format", "csv"], "a data dir exports only as --format hf"),
        ([str(data), "--format", "hf", "--out", str(data / "inside")], "inside the data dir"),
        ([str(tmp_path), "--format", "hf"], "neither a run dir"),
    ):
        res = cli("export", *args)  # a UserError: `tsbench` prints its one line and exits 2
        assert isinstance(res.exception, UserError) and message in str(res.exception), res.output


def test_a_timesage_set_with_map_columns_loads_too(tmp_path, monkeypatch):
    """TimeSage's periods carry a map column (`files`), which `datasets` has no type for: that file is
    rewritten with it as a list of {key, value}; the scenarios file is copied as is."""
    res = cli("generate", "--family", "timesage", "--scenarios", "3", "--periods", "2", "--out", str(tmp_path / "ts"))
    assert res.exit_code == 0, res.output
    res = cli("export", str(tmp_path / "ts" / "seed42"), "--format", "hf", "--out", str(tmp_path / "hf"))
    assert res.exit_code == 0, res.output
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    periods = datasets.load_dataset(str(tmp_path / "hf"), "periods", cache_dir=str(tmp_path / "cache"))["test"]
    source = pq.read_table(tmp_path / "ts" / "seed42" / "periods.parquet").slice(0, 1).to_pylist()[0]
    assert periods.num_rows == 6 and {f["key"]: f["value"] for f in periods[0]["files"]} == dict(source["files"])
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "Rewritten, not copied" in card and "`periods.parquet`" in card and '"scenarios": 3' in card
    assert _sha(tmp_path / "hf" / "data/scenarios/test-00000-of-00001.parquet") == _sha(
        tmp_path / "ts" / "seed42" / "scenarios.parquet"
    )


def test_a_test_only_export_names_no_validation_split(small_data, tmp_path):
    res = cli("export", str(small_data), "--format", "hf", "--out", str(tmp_path / "hf"))
    assert res.exit_code == 0, res.output
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "validation" not in card and "`gold` (the answer" in card
