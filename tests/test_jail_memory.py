"""Issue 29, fault 3: host memory is bounded by the episode, not by what model code prints. A cell that
prints a huge string in one message is refused by the host's zmq sockets (MAXMSGSIZE) before its body
is read, the observation says that output was cut, and the episode goes on. Measured in a fresh host
process (peak RSS is a high-water mark). Before the bound, 128 MiB printed grew the host by ~3x that."""

from __future__ import annotations

import pytest

from tsbench.bench.common import measure_in_child
from tsbench.bench.jail import host_rss_for_print

pytestmark = pytest.mark.timeout(180)

PRINTED_MIB = 128


def test_a_huge_print_does_not_grow_the_host():
    _, _, seen = measure_in_child(host_rss_for_print, PRINTED_MIB)
    assert seen["growth_bytes"] < 32 * 2**20, seen  # the message is never received, let alone decoded
    assert seen["cut"], seen  # the observation carries the marker
    assert seen["goes_on"], seen


def test_ordinary_output_still_arrives_whole_below_the_bound():
    from tsbench.harness.runtime.sandbox import Sandbox

    with Sandbox({}) as box:
        cell = box.run("print('y' * (4 * 2**20)); 7")  # 4 MiB: received, then cut to the host's buffer
        assert cell.result_repr == "7" and "output cut" not in cell.stdout
        assert cell.stdout.startswith("y" * 1000) and "truncated" in cell.stdout
        # json, not orjson even where installed: orjson's output buffer took a 900 MiB print past the kernel's
        # memory bound (the kernel died instead of the host cutting the message; make bench's host RSS line)
        assert box.run("get_ipython().kernel.session.pack.__name__").result_repr == "'json_packer'"


def test_a_huge_final_answer_is_cut_recorded_and_stored_once(small_data, tmp_path):
    """A 3 MB answer under final_answer_chars=1000: the row keeps 1000 characters and a marker, says how
    much was cut, and samples.jsonl holds the answer once (the transcript points at final_message)."""
    import json

    from tsbench import results as schema
    from tsbench.core.config import build
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval
    from tsbench.results.records import transcript_events
    from tsbench.testing.fake_openai_server import FakeOpenAIServer

    answer = '{"answer": "Yes"} ' + "z" * 3_000_000
    with FakeOpenAIServer(default=f"ok:{answer}") as server:
        cfg = build(
            EvalConfig,
            {
                "model": "openai/fake-model",
                "base_url": server.base_url,
                "harness": "single-pass-text",
                "data": [str(small_data)],
                "limit": 1,
                "categories": ["presence"],
                "final_answer_chars": 1000,
                "out": str(tmp_path / "run"),
            },
        )
        run_dir = run_eval(cfg)
    rows = [json.loads(line) for line in (run_dir / schema.JOURNAL).read_text().splitlines() if line.strip()]
    rows = [row for row in rows if "final_message" in row]
    assert rows
    for row in rows:
        assert row["error_type"] is None, row["error"]
        assert row["final_message"].startswith(answer[:1000]) and len(row["final_message"]) < 1100
        assert "final answer cut: 2999018 more characters" in row["final_message"]
        assert row["attributes"]["final_answer_cut_chars"] == "2999018"
        assert row["final_message"] not in row["transcript"]  # stored once
        said = [event for event in transcript_events(row) if event.get("content") == row["final_message"]]
        assert len(said) == 1  # and put back where it was said
    assert (run_dir / schema.JOURNAL).stat().st_size < 20_000 * len(rows)
