"""Processes and devices: the `accelerate launch` command a run relaunches itself under (one machine
or several), and the device layouts that cannot work, refused in one line before anything starts.

Several machines: every machine runs the same `tsbench train-grpo` with its own `--machine-rank`,
the same `--num-machines`, `--main-process-ip` and `--main-process-port`, and `--num-processes`
counting every process of every machine (accelerate's meaning). The run dir (`--out`) must be one
shared path (NFS or alike) that every machine sees at the same place: the main process writes
train.json, the checkpoints, metrics.parquet and the rollouts journal there; every process writes
its own ranks/rank-<i>.jsonl; `--resume` on every machine continues from the last checkpoint.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tsbench.core.errors import UserError

LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "0.0.0.0")


def launch_command(launch: Any, argv: list[str]) -> list[str]:
    """`accelerate launch` running this same tsbench command in every process of this machine
    (`launch` is a LaunchConfig)."""
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(launch.num_processes)]
    if launch.accelerate_config:
        if not Path(launch.accelerate_config).is_file():
            raise UserError(f"no such accelerate config: {launch.accelerate_config}")
        command += ["--config_file", launch.accelerate_config]
    elif launch.num_processes > 1:  # torchrun's N processes: DDP on GPUs, gloo on CPU (train/grpo.py)
        command += ["--multi_gpu"]
    if launch.num_machines > 1:
        if launch.num_processes % launch.num_machines:
            raise UserError(
                f"--num-processes ({launch.num_processes}, every machine's together) must split evenly over "
                f"--num-machines {launch.num_machines}"
            )
        if not launch.main_process_ip or not launch.main_process_port:
            raise UserError("several machines need --main-process-ip and --main-process-port (the main machine's)")
        command += ["--num_machines", str(launch.num_machines), "--machine_rank", str(launch.machine_rank)]
        command += ["--main_process_ip", launch.main_process_ip, "--main_process_port", str(launch.main_process_port)]
    elif launch.main_process_port:
        command += ["--main_process_port", str(launch.main_process_port)]
    elif not launch.accelerate_config and launch.num_processes > 1:
        command += ["--main_process_port", "0"]  # a free port: runs on one machine never collide
    return command + ["-m", "tsbench.cli", *argv]


def needs_launcher(launch: Any) -> bool:
    return launch.num_processes > 1 or launch.num_machines > 1 or bool(launch.accelerate_config)


def device_problems(cfg: Any, *, processes: int, gpus_visible: int, gpus_on_machine: int | None) -> list[str]:
    """Layouts that cannot train, one phrase each (pure: `check_devices` and --check pass the counts)."""
    engine = cfg.rollout.engine
    found = []
    if engine != "hf" and gpus_visible == 0:
        found.append(
            f"--engine {engine} needs vLLM on a GPU machine (pip install 'tsbench[gpu]'); use --engine hf on CPU"
        )
    if processes == 1 and gpus_visible > 1:
        found.append(
            f"one process sees {gpus_visible} GPUs, and TRL refuses nn.DataParallel: train on all of them with "
            f"--num-processes {gpus_visible}, or on one with CUDA_VISIBLE_DEVICES=0"
        )
    url = cfg.vllm_server_base_url or ""
    if engine == "vllm-server" and gpus_on_machine == 1 and any(host in url for host in LOOPBACK):
        found.append(
            "--engine vllm-server on a machine with one GPU: `trl vllm-serve` holds it, and TRL's weight sync joins "
            "its NCCL group as a second rank on the same device, which ends in a timeout; give the server a GPU of "
            "its own (CUDA_VISIBLE_DEVICES) or use --engine vllm-colocate"
        )
    return found


def gpus_on_this_machine() -> int | None:
    """Every GPU of this machine, visible to this process or not (nvidia-smi -L); None when unknown."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return sum(1 for line in listed.splitlines() if line.startswith("GPU "))


def check_devices(cfg: Any, state: Any, on_gpu: bool) -> None:
    """One line (exit 2) for a device layout that cannot work, before any weights load or server is called."""
    import torch
    from accelerate.utils import DistributedType

    visible = torch.cuda.device_count() if on_gpu else 0
    found = device_problems(
        cfg,
        processes=state.num_processes,
        gpus_visible=visible,
        gpus_on_machine=gpus_on_this_machine() if on_gpu else 0,
    )
    if cfg.rollout.engine == "hf" and state.distributed_type == DistributedType.FSDP:
        found.append(
            "FSDP shards the weights the hf engine would generate with: use --engine vllm-colocate "
            "or vllm-server (or DeepSpeed ZeRO-3, experiments/grpo/accelerate/zero3.yaml)"
        )
    if found:
        raise UserError("; ".join(found))


def distributed_state(timeout_s: float, *, cpu: bool) -> Any:
    """accelerate's PartialState with the run's process-group timeout.

    The process group is created once, by whoever first builds a PartialState (TRL's TrainingArguments
    does so lazily with `ddp_timeout`, but train-grpo needs the state before those arguments exist), so
    the timeout has to go in here: created without one, NCCL's watchdog aborts a collective after 10
    minutes and DeepSpeed's after 30, whatever `ddp_timeout` says, and a rank that waits in
    `gather_object` for a slower rank's rollouts dies there."""
    from datetime import timedelta

    from accelerate import PartialState

    return PartialState(cpu=cpu, timeout=timedelta(seconds=timeout_s))


def group_timeout_s() -> float | None:
    """The live default process group's timeout in seconds (None without a group): what the watchdog uses."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    import torch

    group = dist.distributed_c10d._get_default_group()
    backend = group._get_backend(torch.device("cuda" if group.name() == "nccl" else "cpu"))
    return backend.options._timeout.total_seconds()
