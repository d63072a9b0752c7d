"""Cost of one TSLM training step per architecture and series length, on this machine.

`python -m tsbench.train.tslm_measure [--backbone local/smollm2-135m] [--lengths 2048,16384]` builds
each architecture (tiny random Chronos-2 unless --encoder names a checkpoint; `--archs toto`: a tiny
random Toto-1.0-QA checkpoint unless --toto names one), takes one warm-up
and `--steps` timed optimizer steps on a random single-channel series, and prints one JSON line
per (architecture, L): trainable / frozen parameters, backbone input tokens, seconds per step and
the process's peak resident memory (each case in a fresh process, so peaks do not mix) or, on a
GPU, the peak allocated CUDA memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def measure(
    arch: str, length: int, backbone: str, encoder: str, steps: int, toto: str | None = None, toto_size: str = "tiny"
) -> dict:
    import torch

    from tsbench.core.episode import EpisodeTask
    from tsbench.harness.series import series_messages
    from tsbench.models.tslm.build import build_tslm
    from tsbench.models.tslm.settings import TSLMSettings

    if arch == "toto":  # Toto-1.0-QA: a checkpoint dir, or a tiny random one (models/tslm/tiny_toto.py)
        import tempfile

        from tsbench.models.tslm.build import LoraSpec
        from tsbench.models.tslm.tiny_toto import make_tiny_toto_checkpoint
        from tsbench.models.tslm.toto_checkpoint import build_for_sft
        from tsbench.models.tslm.toto_encoder import base_toto_config, tiny_toto_config

        sizes = base_toto_config() if toto_size == "base" else tiny_toto_config()
        checkpoint = toto or str(make_tiny_toto_checkpoint(Path(tempfile.mkdtemp()) / "toto", toto_config=sizes))
        model = build_for_sft(checkpoint, TSLMSettings(), LoraSpec())
    else:
        model = build_tslm(arch, TSLMSettings(backbone=backbone, encoder=encoder))
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    values = torch.randn(1, length, generator=torch.Generator().manual_seed(0))
    task = EpisodeTask("r", "localize", "precise", "Where is the anomaly?", ["x"], values.numpy())
    prompt = model.render_prompt(series_messages(task, with_plot=bool(getattr(model, "wants_plot", False))))
    answer = model.tokenizer('{"present": true, "start": 100, "end": 200}', add_special_tokens=False)["input_ids"]
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    cuda = model.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    model.train()
    times, cpu = [], []
    for i in range(steps + 1):
        started, started_cpu = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        model.loss(prompt, values, answer).backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
    tokens = model.build_inputs(prompt, values).embeds.shape[1] + len(answer)
    peak = (
        torch.cuda.max_memory_allocated() / 2**20 if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    return {
        "arch": arch,
        "L": length,
        **model.parameter_counts(),
        "input_tokens": int(tokens),
        "step_s": round(sum(times) / len(times), 3),
        "step_cpu_s": round(sum(cpu) / len(cpu), 3),  # CPU seconds: the wall time on a shared machine is noisy
        "peak_mib": round(peak, 1),
        "peak_mib_after_build": round(rss_built, 1),
        "device": str(model.device),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="chatts,flamingo,itformer")
    parser.add_argument("--lengths", default="2048,16384")
    parser.add_argument("--backbone", default="local/smollm2-135m")
    parser.add_argument("--encoder", default="tiny-random")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--toto", help="arch toto: a Toto-1.0-QA checkpoint dir [a tiny random one]")
    parser.add_argument("--toto-size", default="tiny", choices=("tiny", "base"), help="the random Toto's sizes")
    parser.add_argument("--one", help="arch:L, measured in this process (used by the driver)")
    args = parser.parse_args()
    if args.one:
        arch, length = args.one.split(":")
        print(
            json.dumps(measure(arch, int(length), args.backbone, args.encoder, args.steps, args.toto, args.toto_size)),
            flush=True,
        )
        return
    for arch in args.archs.split(","):
        for length in args.lengths.split(","):
            command = [sys.executable, "-m", "tsbench.train.tslm_measure", "--one", f"{arch}:{length}"]
            command += ["--backbone", args.backbone, "--encoder", args.encoder, "--steps", str(args.steps)]
            command += (["--toto", args.toto] if args.toto else []) + ["--toto-size", args.toto_size]
            done = subprocess.run(command, capture_output=True, text=True)
            line = done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else None
            print(line or json.dumps({"arch": arch, "L": int(length), "error": done.stderr.strip()[-300:]}), flush=True)


if __name__ == "__main__":
    main()
