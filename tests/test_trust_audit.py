"""An audit of issue 37's principles with attacks the issue did not list, each a real run or a real file.

Before these fixes: a run dir copied from elsewhere whose run.json, results.json, journal line or transcript
nested `[` a few thousand deep ended leaderboard / show / export in a RecursionError traceback, as did a
deep manifest (describe, eval), a deep line of `score --responses`, a deep --config TOML and a deep tool
call from a model (an "internal" error row, not a 0); a 15 KB samples.parquet (one dictionary value
repeated) took `show` to 4 GiB and a 280 KB data file took eval to 1.8 GiB; a parquet footer edited to
understate its pages passed every check; `eval --overwrite` emptied any folder named as --out; a tool.py
in --tools-dir linked to a host file sent that file's text to the model's server; a --path file linked
out of its folder rooted the names inside it beside the link's target; a model server's gzip-bombed
answer (1 MB on the wire) took the host to 3 GiB; a config's base_url got VLLM_API_KEY and a config's Ray
cluster the driver's keys; the stumpy warm-up held two pipes past the eval that started it."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.core.input_budget import SCALE_ENV, Budget, check_parquet, page_sizes
from tsbench.core.user_files import UserFolder
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.leaderboard.load import load_results
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.train.sft_timemaster import traces_from_jsonl

DEEP = "[" * 100_000 + "]" * 100_000


def one_line(code: int, err: str, *naming: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(text in lines[0] for text in naming), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(small_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("audit") / "run"
    cfg = dict(model="scripted/zscore", harness="single-pass-text", data=[str(small_data)], regime="coarse")
    return run_eval(build(EvalConfig, cfg | dict(categories=[lb.PRESENCE], limit=2, out=str(out))))


def copy_run(run_dir: Path, where: Path) -> Path:
    copy = shutil.copytree(run_dir, where)
    (copy / ".tsbench.lock").unlink(missing_ok=True)
    return copy


# -- JSON nested too deeply ---------------------------------------------------------------------------------------
def test_json_nested_too_deeply_is_one_line_in_every_run_reader(cli, run_dir, tmp_path):
    deep_run = copy_run(run_dir, tmp_path / "deep_run")
    (deep_run / "run.json").write_text(DEEP)
    one_line(*cli("leaderboard", deep_run, "--out", tmp_path / "b1")[::2], "run.json is nested too deeply")

    deep_results = copy_run(run_dir, tmp_path / "deep_results")
    (deep_results / "results.json").write_text(DEEP)
    one_line(*cli("export", deep_results, "-f", "inspect", "--out", tmp_path / "x.eval")[::2], "nested too deeply")
    deep_line = copy_run(run_dir, tmp_path / "deep_line")
    with open(deep_line / "samples.jsonl", "a") as journal:
        journal.write(DEEP + "\n")
    rows, infos, warnings = load_results([deep_results, deep_line])  # the leaderboard's reader: each run still read
    assert [info.path.name for info in infos] == ["deep_results", "deep_line"] and len(rows) == 2  # copies: merged
    assert "deep_results: results.json is unreadable" in warnings[0], warnings
    assert "deep_line: skipped 1 unreadable journal line(s) (line 3)" in warnings[1], warnings

    deep_transcript = copy_run(run_dir, tmp_path / "deep_transcript")
    records = [json.loads(line) for line in (deep_transcript / "samples.jsonl").read_text().splitlines()]
    records[0]["transcript"] = DEEP
    (deep_transcript / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    one_line(*cli("show", deep_transcript, "--id", records[0]["id"])[::2], "transcript of row", "nested too deeply")


def test_json_nested_too_deeply_in_a_manifest_responses_or_config_is_one_line(cli, small_data, tmp_path):
    data = shutil.copytree(small_data, tmp_path / "data")
    (data / "manifest.json").write_text(DEEP)
    one_line(*cli("describe", data / "test-coarse.parquet")[::2], "manifest.json is nested too deeply")
    responses = tmp_path / "responses.jsonl"
    responses.write_text('{"id": "x", "response": ' + DEEP + "}\n")
    one_line(*cli("score", "--data", small_data / "test-coarse.parquet", "--responses", responses)[::2], ":1:")
    traces = tmp_path / "traces.jsonl"
    traces.write_text('{"prompt": "p", "response": ' + DEEP + "}\n")
    with pytest.raises(UserError, match="traces.jsonl:1: not a trace line"):  # sft-baseline's --data traces
        traces_from_jsonl(traces, Counter())
    config = tmp_path / "deep.toml"
    config.write_text("[eval]\nx = " + DEEP + "\n")
    one_line(*cli("eval", "--config", config)[::2], "nested too deeply to read as TOML")


def test_a_model_or_tool_that_writes_deep_json_gets_an_error_observation_not_an_internal_error():
    from tsbench.harness.runtime.observation import CellResult
    from tsbench.harness.skills import SkillLibrary, decide, static_problems
    from tsbench.harness.tool_protocol import _decode_arguments
    from tsbench.harness.toolset import RESULT_TAG, read_observation

    arguments, error = _decode_arguments('{"answer": ' + DEEP + "}")
    assert arguments is None and "not valid JSON" in error
    for printed in (DEEP, "[1, 2]", '"error"', '{"image_png_b64": "not base64!"}'):
        observation = read_observation(CellResult(stdout=f"{RESULT_TAG}{printed}\n"), 1000)
        assert observation.error and "not valid JSON" in observation.text
    assert decide({"code": "def f(): pass"}, [1], None) == ["the check could not run in the kernel"]
    deep_code = {"name": "f", "description": "d", "code": "x" + ".a" * 200_000}
    assert static_problems(deep_code, SkillLibrary(), [], [])[-1] == "code does not parse: nested too deeply"


# -- parquet that expands -----------------------------------------------------------------------------------------
def repeated_text(rows: int, size: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["x" * size]))


def test_a_samples_parquet_that_expands_is_refused_before_it_is_read(cli, run_dir, tmp_path, monkeypatch):
    bomb = copy_run(run_dir, tmp_path / "bomb")
    (bomb / "samples.jsonl").unlink()  # the parquet is read only when the journal is gone
    table = pq.read_table(bomb / "samples.parquet")
    rows = table.take(pa.array([0] * 400))
    rows = rows.set_column(rows.schema.get_field_index("final_message"), "final_message", repeated_text(400, 2**16))
    pq.write_table(rows, bomb / "samples.parquet", store_schema=False)  # read back as plain text
    assert (bomb / "samples.parquet").stat().st_size < 100_000  # 25 MiB once read
    monkeypatch.setenv(SCALE_ENV, "0.05")  # a 12.8 MiB budget: the same refusal, on a file small enough to test
    one_line(*cli("show", bomb)[::2], "samples.parquet: its text once dictionaries are expanded is 2", "budget")
    code, _, err = cli("leaderboard", bomb, "--out", tmp_path / "board")
    assert code == 2 and "over the input budget" in err and "Traceback" not in err


def test_a_data_file_whose_light_column_expands_is_refused_by_eval_and_describe(cli, small_data, tmp_path, monkeypatch):
    data = shutil.copytree(small_data, tmp_path / "data")
    table = pq.read_table(data / "test-coarse.parquet")
    rows = table.take(pa.array([0] * 400))
    rows = rows.set_column(rows.schema.get_field_index("plan"), "plan", repeated_text(400, 2**16))
    pq.write_table(rows, data / "test-coarse.parquet", store_schema=False)
    monkeypatch.setenv(SCALE_ENV, "0.05")
    naming = ("test-coarse.parquet: its text once dictionaries are expanded, in row group 0 is 2", "input budget")
    one_line(*cli("describe", data / "test-coarse.parquet")[::2], *naming)
    one_line(*cli("eval", "--model", "scripted/zscore", "--data", data, "--regime", "coarse",
                  "--allow-modified-data", "--out", tmp_path / "run")[::2], *naming)  # fmt: skip


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def understate_footer(path: Path, *declared: int) -> None:
    """Rewrite each of `declared` (i64 fields of the footer: sizes, value counts) as 10, in the same
    number of bytes (an overlong varint), so the file stays valid and its pages unchanged."""
    data = bytearray(path.read_bytes())
    length = struct.unpack("<I", data[-8:-4])[0]
    footer = bytes(data[-8 - length : -8])
    for number in declared:
        wide, small = _varint(number << 1), _varint(20)  # zigzag
        assert footer.count(wide) >= 1 and len(wide) > len(small)
        footer = footer.replace(wide, bytes(b | 0x80 for b in small) + b"\x80" * (len(wide) - len(small) - 1) + b"\0")
    data[-8 - length : -8] = footer
    path.write_bytes(data)


def test_a_footer_that_understates_its_pages_is_refused_from_the_page_headers(tmp_path):
    path = tmp_path / "understated.parquet"
    pq.write_table(pa.table({"values": pa.array([[0.0] * 4_000_000], pa.list_(pa.float64()))}), path)
    honest = pq.ParquetFile(path).metadata
    chunk = honest.row_group(0).column(0)
    (size, values), budget = page_sizes(path, honest, "x")[0, 0], Budget(decoded_bytes=16 * 2**20)
    assert values == chunk.num_values and 0 < size <= chunk.total_uncompressed_size  # the footer counts headers too
    with pytest.raises(UserError, match="from the footer's value counts"):
        check_parquet(path, "understated.parquet", budget)
    understate_footer(path, chunk.num_values)
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).num_values == 10  # the footer now lies
    assert len(pq.read_table(path).column(0)[0].values) == 4_000_000  # and the pages still hold 30 MiB
    with pytest.raises(UserError, match="understated.parquet: the decoded size of its values .from the pages' value"):
        check_parquet(path, "understated.parquet", budget)
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset : chunk.data_page_offset + 8] = b"\xff" * 8  # no page header where one should be
    path.write_bytes(data)
    with pytest.raises(UserError, match="is not a readable parquet file .unknown Thrift type"):
        check_parquet(path, "understated.parquet", budget)


# -- folders: what may be deleted, what may be read -----------------------------------------------------------------
def test_overwrite_and_exports_never_delete_a_folder_they_did_not_write(cli, small_data, run_dir, tmp_path):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "README.md").write_text("my work")
    (project / "src" / "code.py").write_text("keep me")
    one_line(*cli("eval", "--model", "scripted/zscore", "--data", small_data, "--regime", "coarse", "--limit", "1",
                  "--out", project, "--overwrite")[::2], "is not a run dir (no run.json); refused to delete it")  # fmt: skip
    one_line(*cli("export", run_dir, "-f", "hf", "--out", project)[::2], "is not a run export")
    from tsbench.train.sft_config import SFTConfig, prepare_out  # imports TRL: here, not when the file is collected

    with pytest.raises(UserError, match="is not a trained model's folder .no run.json.; refused to delete it"):
        prepare_out(build(SFTConfig, {"model": "local/x", "out": str(project), "overwrite": True}))
    assert (project / "src" / "code.py").read_text() == "keep me" and (project / "README.md").is_file()
    code, _, err = cli("export", run_dir, "-f", "hf", "--out", tmp_path / "export")
    assert code == 0, err
    assert cli("export", run_dir, "-f", "hf", "--out", tmp_path / "export")[0] == 0  # its own export: replaced


def test_a_tools_dir_entry_linked_out_is_refused_before_any_episode(cli, small_data, tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.py").write_text(
        'def leak(x: int = 1) -> dict:\n    """HOST SECRET."""\n    return {}\n'
    )
    (tmp_path / "tools" / "leak").mkdir(parents=True)
    (tmp_path / "tools" / "leak" / "tool.py").symlink_to(tmp_path / "outside" / "secret.py")
    one_line(*cli("eval", "--model", "scripted/tools", "--harness", "tools", "--data", small_data, "--limit", "1",
                  "--tools-dir", tmp_path / "tools", "--out", tmp_path / "run")[::2],
             "leak/tool.py: leads to", "outside --tools-dir")  # fmt: skip
    assert not (tmp_path / "run" / "samples.jsonl").exists()


def test_a_path_file_linked_out_of_its_folder_and_folders_linked_out_are_named(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "all.jsonl").write_text("{}\n")
    (tmp_path / "root" / "all.jsonl").symlink_to(tmp_path / "outside" / "all.jsonl")
    with pytest.raises(UserError, match="outside the folder it is named in .*; refused .pass --path "):
        UserFolder(tmp_path / "root" / "all.jsonl", "demo")
    assert UserFolder(tmp_path / "outside" / "all.jsonl", "demo").read_text(tmp_path / "outside" / "all.jsonl")
    (tmp_path / "root" / "all.jsonl").unlink()
    os.link(tmp_path / "outside" / "all.jsonl", tmp_path / "root" / "hard.jsonl")  # a hard link: an ordinary file
    assert UserFolder(tmp_path / "root", "demo").read_text(tmp_path / "root" / "hard.jsonl") == "{}\n"
    (tmp_path / "root" / "sub").symlink_to(tmp_path / "outside")
    with pytest.raises(UserError, match="^sub: leads to"):
        UserFolder(tmp_path / "root", "demo").walk()


def test_a_folder_swapped_for_a_link_after_the_check_is_refused_not_read(tmp_path):
    (tmp_path / "root" / "part").mkdir(parents=True)
    (tmp_path / "root" / "part" / "a.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.txt").write_text("HOST")
    folder = UserFolder(tmp_path / "root", "demo")
    real = folder._checked(tmp_path / "root" / "part" / "a.txt")  # checked: a regular file under the root
    shutil.rmtree(tmp_path / "root" / "part")
    (tmp_path / "root" / "part").symlink_to(tmp_path / "outside")  # then swapped for a link out
    with pytest.raises(UserError, match="part/a.txt: changed while it was read"):
        folder._descriptor(tmp_path / "root" / "part" / "a.txt", real)


# -- model servers, keys ---------------------------------------------------------------------------------------------
class AnswerServer:
    """127.0.0.1: answers every POST with (headers, body) from `answer()`; logs Authorization headers."""

    def __init__(self, answer) -> None:
        self.keys: list[str | None] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.keys.append(self.headers.get("Authorization"))
                headers, body = answer()
                self.send_response(200)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:  # the client hung up, as it should past the bound
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


REPLY = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "usage": None,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
    }  # fmt: skip
).encode()


def test_a_model_servers_answer_is_bounded_before_it_is_held(monkeypatch):
    from tsbench.models import http
    from tsbench.models.base import Message, ModelError
    from tsbench.models.openai_model import OpenAIChatModel
    from tsbench.models.retry import RetryPolicy

    monkeypatch.setattr(http, "MAX_RESPONSE_BYTES", 2**20)
    padding = b" " * (2 * 2**20)  # JSON whitespace: a valid answer, twice the bound
    answers = {
        "gzip": ({"Content-Encoding": "gzip"}, gzip.compress(REPLY[:-1] + padding + b"}")),
        "declared": ({"Content-Length": str(len(REPLY) + len(padding))}, REPLY[:-1] + padding + b"}"),
        "streamed": ({}, REPLY[:-1] + padding + b"}"),  # no length: read until the server closes
        "deep": ({}, DEEP.encode()),
    }
    for name, (headers, body) in answers.items():
        server = AnswerServer(lambda headers=headers, body=body: (headers, body))
        try:
            model = OpenAIChatModel("m", base_url=server.url, retry=RetryPolicy(1))
            with pytest.raises(ModelError) as raised:
                model.generate([Message("user", "hello")])
            expected = {"gzip": "compressed (gzip)", "declared": "declares", "streamed": "over 1,048,576 bytes"}
            assert expected.get(name, "malformed JSON body") in str(raised.value), (name, raised.value)
        finally:
            server.close()
    server = AnswerServer(lambda: ({}, REPLY))
    try:
        assert OpenAIChatModel("m", base_url=server.url, retry=RetryPolicy(1)).generate([Message("user", "hi")]).text
    finally:
        server.close()


def test_vllm_api_key_goes_only_to_the_server_vllm_base_url_names(monkeypatch):
    from tsbench.models.vllm_server import VLLMChatModel

    server = AnswerServer(lambda: ({}, REPLY))
    try:
        monkeypatch.setenv("VLLM_API_KEY", "vllm-secret")
        monkeypatch.delenv("VLLM_BASE_URL", raising=False)
        from tsbench.models.base import Message

        VLLMChatModel("m", base_url=server.url).generate([Message("user", "hi")])  # a config's base_url
        monkeypatch.setenv("VLLM_BASE_URL", server.url.removesuffix("/v1"))  # the pair the user exported
        VLLMChatModel("m").generate([Message("user", "hi")])
        assert server.keys == ["Bearer EMPTY", "Bearer vllm-secret"]
    finally:
        server.close()


def test_a_ray_cluster_only_a_config_names_gets_no_key(cli, tmp_path, monkeypatch):
    from tsbench.eval.config_keys import config_key_refusals

    monkeypatch.setenv("OPENAI_API_KEY", "sk-user")
    config = tmp_path / "shared.toml"
    config.write_text('[eval]\nmodel = "openai/x"\nexecutor = "ray"\nray_address = "10.9.8.7:6379"\nlimit = 1\n')
    one_line(*cli("eval", "--config", config)[::2], "names the Ray cluster 10.9.8.7:6379", "OPENAI_API_KEY")
    cfg = build(EvalConfig, {"model": "openai/x", "executor": "ray", "ray_address": "10.9.8.7:6379"})
    file = {"executor": "ray", "ray_address": "10.9.8.7:6379"}
    assert config_key_refusals(cfg, file, {"ray_address": "10.9.8.7:6379"}) == []  # typed on the command line
    local = build(EvalConfig, {"model": "openai/x", "executor": "ray", "ray_address": "auto"})
    assert config_key_refusals(local, {**file, "ray_address": "auto"}, {}) == []  # this machine's cluster


def test_the_stumpy_warm_up_holds_no_descriptor_of_the_run(tmp_path, monkeypatch):
    from tsbench.harness import stumpy_cache

    monkeypatch.setenv("TSBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(stumpy_cache, "_WARM_CODE", "import time; time.sleep(1.5)")
    before = set(os.listdir("/proc/self/fd"))
    worker = threading.Thread(target=stumpy_cache.warm_stumpy_cache)
    worker.start()
    try:
        threading.Event().wait(0.7)  # the child is running
        pipes = [os.readlink(f"/proc/self/fd/{fd}") for fd in set(os.listdir("/proc/self/fd")) - before]
        assert not [target for target in pipes if target.startswith("pipe:")], pipes
    finally:
        worker.join()
    assert stumpy_cache.stumpy_cache_ready()
