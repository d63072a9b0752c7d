"""The scale benches measure what they say: the /proc sampler counts a child's CPU and memory (a jailed
kernel's CPU never reaches RUSAGE_CHILDREN), and the bench command refuses bad input in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tsbench.bench.__main__ import main as bench_main
from tsbench.bench.tree import TreeSampler

BUSY = (
    "import time\nend = time.process_time() + 0.4\nblock = bytearray(64 * 2**20)\nwhile time.process_time() < end: pass"
)


def test_the_tree_sampler_counts_a_childs_cpu_and_memory():
    with TreeSampler(0.05) as tree:
        subprocess.run([sys.executable, "-c", BUSY], check=True)
    assert tree.descendants_cpu_s >= 0.2  # sampled while it ran: most of its 0.4 s
    assert tree.cpu_s >= tree.descendants_cpu_s
    assert tree.peak_rss >= tree.peak_host_rss + 60 * 2**20  # its 64 MiB block, beside this process


def test_the_host_cpu_is_this_process_own_work_not_its_child_nor_the_sampler():
    import time

    with TreeSampler(0.01) as tree:  # scans of /proc 100 times a second: the sampler's own CPU
        subprocess.run([sys.executable, "-c", BUSY], check=True)
        end = time.thread_time() + 0.3
        while time.thread_time() < end:  # this thread's work: the host's
            pass
    assert tree.sampler_cpu_s > 0
    assert 0.25 <= tree.host_cpu_s < 0.38  # the busy loop: neither the child's 0.4 s nor the scans
    assert tree.cpu_s >= tree.host_cpu_s + tree.sampler_cpu_s + tree.descendants_cpu_s - 0.05


@pytest.mark.parametrize("argv", [["nope"], ["paper-split", "--fraction", "0"], ["paper-split", "--fraction", "x"]])
def test_the_bench_command_refuses_bad_input_with_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_main(argv)
    assert exit_info.value.code == 2
    assert "error" in capsys.readouterr().err
