"""`python -m tsbench.bench [section ...]`: run the benchmarks and print their ratios."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    from tsbench.bench import generation

    sections = {"generate": generation.main}
    from tsbench.bench import baselines, ray_eval, timesage

    sections["baselines"] = baselines.main
    sections["timesage"] = timesage.main
    from tsbench.bench import jail

    sections["jail"] = jail.main
    sections["ray"] = ray_eval.main
    try:
        from tsbench.bench import eval_overhead

        sections["eval"] = eval_overhead.main
    except ImportError:
        pass
    wanted = argv or list(sections)
    for name in wanted:
        if name not in sections:
            print(f"error: unknown benchmark {name!r}; choose from {', '.join(sections)}", file=sys.stderr)
            sys.exit(2)
        sections[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
