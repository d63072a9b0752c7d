"""`python -m tsbench.bench [section ...]`: run the benchmarks and print their ratios."""

from __future__ import annotations

import sys

from tsbench.bench import baselines, detector, eval_overhead, generation, jail, ray_eval, startup, timesage, train_grpo

SECTIONS = {
    "startup": startup.main,
    "generate": generation.main,
    "baselines": baselines.main,
    "detector": detector.main,
    "timesage": timesage.main,
    "jail": jail.main,
    "ray": ray_eval.main,
    "eval": eval_overhead.main,
    "train": train_grpo.main,
}


def main(argv: list[str]) -> None:
    wanted = argv or list(SECTIONS)
    for name in wanted:
        if name not in SECTIONS:
            print(f"error: unknown benchmark {name!r}; choose from {', '.join(SECTIONS)}", file=sys.stderr)
            sys.exit(2)
    for name in wanted:
        SECTIONS[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
