"""Seconds each reader of model output takes on each attack of tests/reader_cases.py, at two sizes.

    PYTHONPATH=SRC python scripts/reader_timings.py [N] [reader-substring]

One child process per reader (a quadratic regex cannot be interrupted inside the process): a call
past the limit is shown as >LIMIT and the child is restarted at the next attack. Output: one TSV line
per (reader, attack): seconds at N, at 2N, their ratio, and the exception a call raised (if any)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "tests"
LIMIT_S = float(os.environ.get("LIMIT_S", "8"))


def child(name: str, attacks: list[str], n: int) -> None:
    sys.path.insert(0, str(HERE))
    import reader_cases

    reader = reader_cases.readers()[name]
    for attack in attacks:
        cells = [attack]
        for size in (n, 2 * n):
            text = reader_cases.ATTACKS[attack](size)
            began = time.process_time()
            try:
                reader(text)
                error = ""
            except BaseException as exc:  # noqa: BLE001 - what we measure
                error = type(exc).__name__
            cells += [f"{time.process_time() - began:.3f}", error]
        print("\t".join(cells), flush=True)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    sys.path.insert(0, str(HERE))
    import reader_cases

    names = [name for name in reader_cases.readers() if only in name]
    attacks = list(reader_cases.ATTACKS)
    for name in names:
        todo = list(attacks)
        while todo:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--child", name, str(n), *todo],
                stdout=subprocess.PIPE,
                text=True,
                env=os.environ,
            )
            done: list[str] = []
            while True:
                ready, _, _ = select.select([proc.stdout], [], [], LIMIT_S * 3)
                line = proc.stdout.readline() if ready else ""  # type: ignore[union-attr]
                if not line:
                    break
                attack, t1, e1, t2, e2 = line.rstrip("\n").split("\t")
                done.append(attack)
                ratio = float(t2) / max(float(t1), 1e-3)
                print(f"{name}\t{attack}\t{t1}\t{t2}\t{ratio:.1f}\t{e1 or e2}", flush=True)
            proc.kill()
            proc.wait()
            todo = todo[len(done) :]
            if todo:  # the next attack ran past the limit
                print(f"{name}\t{todo[0]}\t>{LIMIT_S}\t-\t-\ttimeout", flush=True)
                todo = todo[1:]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[4:], int(sys.argv[3]))
    else:
        main()
