"""The conventions inspect and lm-eval users bring: --limit in total, -M/-T key=value arguments,
--log-dir, results.json keyed by task with the paper's metrics, and a text budget that fits the
model's context (measured with a real tokenizer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tsbench.core.errors import UserError
from tsbench.eval.model_args import parse_model_args, task_settings
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.testing import readiness

TSBENCH = [sys.executable, "-m", "tsbench.cli"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return readiness.run([*TSBENCH, *args], capture_output=True, text=True, cwd=cwd)


def test_key_value_arguments_parse_as_inspect_writes_them():
    # The settings reader splits lists at commas: a piece without "=" continues the value before it.
    assert parse_model_args(["context_tokens=8192", "price=0.4", "1.6", "device=cpu", "x=true"]) == {
        "context_tokens": 8192,
        "price": "0.4,1.6",
        "device": "cpu",
        "x": True,
    }
    assert task_settings(["regime=precise", "categories=localize", "presence"]) == {
        "regime": "precise",
        "categories": "localize,presence",
    }
    with pytest.raises(UserError, match="-M takes KEY=VALUE"):
        parse_model_args(["8192"])


@pytest.fixture(scope="module")
def cli_run(small_data, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One CLI eval in the conventions' spelling: -T for the task, --limit in total, --log-dir."""
    logs = tmp_path_factory.mktemp("logs")
    res = run(
        "eval",
        "--model",
        "scripted/zscore",
        "--harness",
        "single-pass-text",
        "--data",
        str(small_data),
        "-T",
        "regime=coarse",
        "-T",
        f"categories={lb.PRESENCE},{lb.INDICATOR}",
        "--limit",
        "3",
        "--log-dir",
        str(logs),
    )
    return logs / "scripted_zscore__single-pass-text", res


def test_limit_counts_rows_in_total_and_log_dir_places_the_run(cli_run):
    import pandas as pd

    run_dir, res = cli_run
    assert res.returncode == 0, res.stderr
    samples = pd.read_parquet(run_dir / "samples.parquet")
    assert len(samples) == 3 and set(samples["category"]) == {lb.PRESENCE, lb.INDICATOR}
    config = json.loads((run_dir / "run.json").read_text())["config"]
    assert config["regime"] == "coarse" and config["limit"] == 3


def test_results_json_is_keyed_by_task_with_macro_f1(cli_run):
    run_dir, res = cli_run
    assert res.returncode == 0, res.stderr
    tasks = json.loads((run_dir / "results.json").read_text())["tasks"]
    assert set(tasks) == {f"anomalyxl/{lb.PRESENCE}", f"anomalyxl/{lb.INDICATOR}", "anomalyxl"}
    presence = tasks[f"anomalyxl/{lb.PRESENCE}"]
    assert presence["primary"] == "macro_f1" and 0.0 <= presence["macro_f1"] <= 1.0
    assert presence["accuracy"] == presence["score"] and presence["n"] >= 1
    assert tasks["anomalyxl"]["n"] == 3 and tasks["anomalyxl"]["errors"] == 0


def test_bad_key_value_is_one_line(small_data, tmp_path):
    res = run("eval", "--model", "scripted/zscore", "--data", str(small_data), "-T", "precise", "--out", str(tmp_path))
    assert res.returncode == 2 and "-T takes KEY=VALUE" in res.stderr and "Traceback" not in res.stderr
    res = run("eval", "--model", "gpt-4.1-mini", "-M", "nonsense=1", "--data", str(small_data), "--out", str(tmp_path))
    assert res.returncode == 2 and "nonsense" in res.stderr and "Traceback" not in res.stderr


class _Counted:
    """A model with a declared context and a real tokenizer (SmolLM2's), as a local model has."""

    def __init__(self, context: int, max_new_tokens: int = 64):
        from transformers import AutoTokenizer

        from tsbench.models.local_hf import ensure_smollm2_cache

        self.tokenizer = AutoTokenizer.from_pretrained(str(ensure_smollm2_cache()[0]))
        self.context_tokens = context
        self.max_new_tokens = max_new_tokens

    def count_tokens(self, messages) -> int:
        chat = [{"role": m.role, "content": m.content} for m in messages]
        encoded = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=True)
        return len(encoded["input_ids"])


def _task(length: int):
    from types import SimpleNamespace

    values = np.random.default_rng(0).normal(size=(2, length)).astype(np.float32)
    return SimpleNamespace(question="Where is the anomaly?", channel_names=["a", "b"], values=values)


def test_text_budget_fits_the_context_counted_by_the_tokenizer():
    from tsbench.harness.prompts import SINGLE_PASS_SYSTEM
    from tsbench.harness.text_budget import fitted_text_prompt

    model = _Counted(context=2048)
    text, stride, notes = fitted_text_prompt(model, SINGLE_PASS_SYSTEM, _task(20_000), 200_000, None)
    assert stride > 1 and notes["prompt_tokens"] <= 2048 - 64 - 16 == notes["prompt_token_room"]
    assert notes["prompt_tokens"] > 0.8 * notes["prompt_token_room"]  # not shrunk far past what fits
    # A short series that fits is left whole; no context known: the character budget alone decides.
    assert fitted_text_prompt(model, SINGLE_PASS_SYSTEM, _task(100), 200_000, None)[1] == 1
    unknown = type("Plain", (), {})()
    assert fitted_text_prompt(unknown, SINGLE_PASS_SYSTEM, _task(20_000), 200_000, None)[2] == {}


def test_text_budget_without_a_tokenizer_converts_conservatively():
    from tsbench.harness.prompts import SINGLE_PASS_SYSTEM
    from tsbench.harness.text_budget import fitted_text_prompt

    declared = type("Served", (), {"context_tokens": 4096})()
    text, stride, notes = fitted_text_prompt(declared, SINGLE_PASS_SYSTEM, _task(20_000), 200_000, 256)
    assert stride > 1 and len(text) <= 4096 - 256
    counted = _Counted(4096)
    from tsbench.models.base import Message

    assert counted.count_tokens([Message("system", SINGLE_PASS_SYSTEM), Message("user", text)]) <= 4096 - 256


def test_exported_targets_hold_no_internal_keys(small_data):
    pytest.importorskip("inspect_ai")
    from tsbench.interop.inspect_task import tsbench_dataset
    from tsbench.interop.public_gold import public_gold

    assert json.loads(public_gold('{"start": 3, "end": 9, "_L": 1024}')) == {"start": 3, "end": 9}
    assert public_gold("not json") == "not json"
    [sample] = tsbench_dataset("anomalyxl", data=str(small_data), regime="precise", categories=lb.LOCALIZE, limit=1)
    assert "_L" not in json.loads(sample.target) and "_L" in json.loads(sample.metadata["gold"])


@pytest.mark.parametrize(
    "listing, expected",
    [
        ({"data": [{"id": "m", "max_model_len": 4096}]}, 4096),  # vLLM
        ({"data": [{"id": "m", "meta": {"n_ctx_train": 2048}}]}, 2048),  # llama.cpp's server
        ({"data": [{"id": "m"}]}, None),  # transformers serve: nothing said, nothing assumed
    ],
)
def test_a_servers_context_is_read_from_its_model_listing(listing, expected):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tsbench.models.openai_model import OpenAIChatModel

    seen: list[str] = []

    class Listing(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server hook's name
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps(listing).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Listing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        model = OpenAIChatModel("m", base_url=url)
        assert model.context_tokens == expected and model.context_tokens == expected
        assert len(seen) == 1  # asked once
        assert OpenAIChatModel("m", base_url=url, context_tokens=999).context_tokens == 999 and len(seen) == 1
    finally:
        httpd.shutdown()
        httpd.server_close()
