"""`python -m tsbench.bench [section ...] [--fraction F] [--data DIR]`: run the benchmarks and print their ratios."""

from __future__ import annotations

import argparse
import importlib
import sys

# section -> its module under tsbench.bench (imported when run: some import torch or ray)
SECTIONS = {
    "startup": "startup",
    "generate": "generation",
    "baselines": "baselines",
    "detector": "detector",
    "timesage": "timesage",
    "jail": "jail",
    "ray": "ray_eval",
    "eval": "eval_overhead",
    "rlm": "rlm_scale",
    "train": "train_grpo",
}
# Run only when named: the whole paper split is ~1,050 kernel starts.
# Table 1's Classical row trains XGBoost heads on TSBENCH_CLASSICAL_FRACTION of the paper's rows (minutes).
NAMED_ONLY = {"paper-split": "paper_split", "classical-row": "classical_row"}


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"a fraction in (0, 1], not {text}")
    return value


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m tsbench.bench", description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"which to run [all but {', '.join(NAMED_ONLY)}]")
    parser.add_argument(
        "--fraction", type=_fraction, default=1.0, help="paper-split: run this fraction of the split's rows [1]"
    )
    parser.add_argument("--data", default=None, help="paper-split: an already generated paper test split [generate]")
    args = parser.parse_args(argv)
    known = {**SECTIONS, **NAMED_ONLY}
    wanted = args.sections or list(SECTIONS)
    for name in wanted:
        if name not in known:
            print(f"error: unknown benchmark {name!r}; choose from {', '.join(known)}", file=sys.stderr)
            sys.exit(2)
    for name in wanted:
        run = importlib.import_module(f"tsbench.bench.{known[name]}").main
        if name == "paper-split":
            run(fraction=args.fraction, data=args.data)
        else:
            run()


if __name__ == "__main__":
    main(sys.argv[1:])
