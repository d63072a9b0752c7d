"""Issue 29, fault 3: host memory is bounded by the episode, not by what model code prints. A cell that
prints a huge string in one message is refused by the host's zmq sockets (MAXMSGSIZE) before its body
is read, the observation says that output was cut, and the episode goes on. Measured in a fresh host
process (peak RSS is a high-water mark). Before the bound, 128 MiB printed grew the host by ~3x that.

Issue 37, item 2: many messages under that cap. A cell that sends N pre-packed 31 MiB messages grew the
host ~25 MiB a message (no receive high-water mark, every message decoded); now the cell's and the
episode's byte budgets hold, messages past them are dropped unread, the observation says which budget
cut them, and the episode goes on. A message the host cannot decode is dropped and counted, not raised
(a replayed signature used to end the episode with a traceback)."""

from __future__ import annotations

import pytest

from tsbench.bench.common import measure_in_child
from tsbench.bench.jail import host_rss_for_messages, host_rss_for_print, packed_flood_code

pytestmark = pytest.mark.timeout(180)

PRINTED_MIB = 128
FLOOD_MESSAGES = 30


def test_a_huge_print_does_not_grow_the_host():
    _, _, seen = measure_in_child(host_rss_for_print, PRINTED_MIB)
    assert seen["growth_bytes"] < 32 * 2**20, seen  # the message is never received, let alone decoded
    assert seen["cut"], seen  # the observation carries the marker
    assert seen["goes_on"], seen


def test_a_flood_of_packed_messages_under_the_cap_does_not_grow_the_host():
    seen = measure_in_child(host_rss_for_messages, FLOOD_MESSAGES)[2]
    assert seen["sent"] and seen["cut"] and seen["goes_on"], seen
    # Two messages fit the default cell budget (64 MiB); the rest is never decoded. Before: ~25 MiB a message.
    assert seen["peak_after_bytes"] - seen["peak_before_bytes"] < 10 * seen["mib"] * 2**20, seen


def test_the_cell_and_episode_budgets_cut_output_and_the_episode_goes_on():
    from tsbench.harness.runtime.sandbox import Sandbox

    with Sandbox({}, cell_output_bytes=3 * 2**20, episode_output_bytes=8 * 2**20, cell_timeout_s=60) as box:
        first = box.run(packed_flood_code(10, 1))  # ten messages just under 1 MiB: three fit the cell's budget
        assert first.result_repr == "'sent'", first
        assert first.stdout.count("x" * 1000) >= 1
        assert "output cut: 7 message(s) from the kernel (7 MiB) past the cell's output budget of 3 MiB" in first.stdout
        assert "output cut" not in box.run(packed_flood_code(3, 1)).stdout  # a new cell, a new cell budget: 6 MiB
        third = box.run(packed_flood_code(3, 1))  # two fit what the episode has left
        assert "output cut: 1 message(s)" in third.stdout and "episode's output budget of 8 MiB" in third.stdout
        spent = box.run("print('y' * 40000)")  # nothing more fits: dropped, yet the cell ends at once
        assert "y" * 100 not in spent.stdout and "episode's output budget" in spent.stdout
        assert not spent.timed_out and not spent.restarted  # ended by itself, well before the 60 s cell limit
        assert "episode's output budget" in spent.observation()  # what the model is shown says so


def test_messages_the_host_cannot_decode_are_dropped_not_raised():
    from tsbench.harness.runtime.sandbox import Sandbox

    code = (
        "from jupyter_client.session import DELIM\n"
        "kernel = get_ipython().kernel; session = kernel.session\n"
        "parent = session.pack(kernel.get_parent('shell')['header'])\n"
        "parts = [session.pack(session.msg_header('stream')), parent, b'{}', session.pack({'name': 'stdout', 'text': 'dup\\n'})]\n"
        "signed = [b'stream.stdout', DELIM, session.sign(parts)] + parts\n"
        "kernel.iopub_socket.send_multipart(signed)\n"
        "kernel.iopub_socket.send_multipart(signed)  # the same signature again\n"
        "kernel.iopub_socket.send_multipart([b'stream.stdout', DELIM, b'0' * 64] + parts)  # a wrong signature\n"
        "kernel.iopub_socket.send_multipart([b'no delimiter at all'])\n"
        "kernel.iopub_socket.send_multipart([b'x', DELIM, b'', b'[not json'] + parts[1:])\n"
        "deep = b'[' * 30000 + b']' * 30000  # signed, yet nested too deeply to parse\n"
        "for shaped in (parts[:3] + [b'[]'], parts[:3] + [session.pack({'name': 'stdout'})], [deep] + parts[1:],\n"
        "               parts[:1] + [deep, deep] + parts[3:]):  # and signed, of the wrong shape\n"
        "    kernel.iopub_socket.send_multipart([b'stream.stdout', DELIM, session.sign(shaped)] + shaped)\n"
        "'sent'"
    )
    with Sandbox({}, cell_timeout_s=60) as box:
        cell = box.run(code)
        assert cell.result_repr == "'sent'" and not cell.restarted, cell
        assert cell.stdout.startswith("dup\ndup\n")  # a replay is the kernel's own business
        assert "7 malformed message(s) from the kernel dropped" in cell.stdout
        assert box.run("6 * 7").result_repr == "42"


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
