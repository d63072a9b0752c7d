"""The journal's crash guarantee with batched fsync: a kill -9 right after `append` returns loses no row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from tsbench.results import schema
from tsbench.results.journal import FSYNC_EVERY_ROWS, Journal, read_journal

_WRITER = textwrap.dedent(
    """
    import sys
    from tsbench.results.journal import Journal
    from tsbench.results.schema import COLUMN_NAMES
    journal = Journal(sys.argv[1])
    for index in range(10_000):
        record = {name: None for name in COLUMN_NAMES}
        record.update(id=f"row-{index}", epoch=0)
        journal.append(record)
        print(index, flush=True)  # the row is finished once append returned
    """
)


def test_kill_9_after_append_loses_no_row(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= FSYNC_EVERY_ROWS + 5:  # past one fsync batch, in the middle of the next
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    ids = [record["id"] for record in read_journal(tmp_path)]
    assert len(ids) >= acknowledged + 1
    assert ids[: acknowledged + 1] == [f"row-{i}" for i in range(acknowledged + 1)]


def test_rows_are_readable_before_any_fsync_and_close_syncs(tmp_path):
    journal = Journal(tmp_path)
    record = {name: None for name in schema.COLUMN_NAMES}
    record.update(id="a", epoch=0)
    journal.append(record)
    assert [r["id"] for r in read_journal(tmp_path)] == ["a"]  # visible to another reader at once
    journal.close()
    assert journal._unsynced == 0
