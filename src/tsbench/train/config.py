"""`tsbench train-grpo`'s settings: TRL's GRPOConfig, with tsbench's own beside it (open-r1's shape).

`GRPOConfig` extends `trl.GRPOConfig`, so every TRL option (and every transformers
TrainingArguments option under it) is a key of the [grpo] table. The TRL options whose default is
the paper's rather than TRL's (timerlm-anomalyxl §4.1: Qwen3.5-4B, Dr. GRPO, 300 steps; the paper
states no RL learning rate: 1e-6 is TRL's own default and TimeMaster's RL rate, Table 6) are declared again here with `setting(...)`, with their old tsbench spellings as aliases
(`steps` = max_steps, `lr` = learning_rate). tsbench's own settings (which weights train, the
reward, the task stream, who generates, the launch, and the harness section handed to the
harness) are declared once, in one small dataclass per concern. A few TRL fields follow from
tsbench's (`DERIVED`: num_generations from group_size, ...): `for_launch` fills them once the
world size is known, then runs TRL's own checks; a config that sets one is refused in one line.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trl

from tsbench.core import settings
from tsbench.core.errors import UserError
from tsbench.core.settings import setting
from tsbench.core.tracking import check_targets
from tsbench.harness.settings import HarnessSettings, MemorySettings
from tsbench.tasks.base import TrainingRequest
from tsbench.train.advantages import ADVANTAGE_STDS
from tsbench.train.rewards import REWARDS
from tsbench.train.timemaster_reward import FORMAT_RULES

ENGINES = ("hf", "vllm-colocate", "vllm-server")
REASONING_HISTORY = ("auto", "as-rendered", "as-generated", "refuse")
# TRL 1.16's loss formulations (trl GRPOConfig loss_type) and vLLM importance-sampling modes
LOSS_TYPES = ("dr_grpo", "grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
IMPORTANCE_SAMPLING = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
CURRICULUM_FRACTION = 220 / 300  # anomaly-free cases withheld for the first 220 of 300 steps
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class PolicyConfig:
    """Which weights train: every parameter (lora = 0) or a LoRA adapter of rank `lora`."""

    model: str = setting(
        "", "Policy: local/smollm2-135m, local/<dir> (a model or an SFT adapter: the warm start), a path, or a hub id."
    )
    lora: int = setting(0, "LoRA rank; 0 trains every parameter (the paper's run).", ge=0)
    lora_alpha: int | None = setting(None, "LoRA alpha [2 x rank].", gt=0)
    lora_dropout: float = setting(0.0, "LoRA dropout.", ge=0, lt=1)
    lora_target: str = setting("all-linear", "LoRA target modules (comma-separated, or all-linear).")
    dtype: str | None = setting(
        None,
        "Stored weights' dtype [float32 for full-parameter training (the optimizer's master copy; GPU compute is "
        "bf16 mixed precision), bfloat16 for a LoRA's base on GPU].",
        choices=DTYPES,
    )

    def targets(self) -> str | list[str]:
        names = [t.strip() for t in self.lora_target.split(",") if t.strip()]
        return "all-linear" if names == ["all-linear"] else names

    def problems(self) -> list[str]:
        found = [] if self.model else ["--model is required"]
        if self.lora and not self.targets():
            found.append("lora_target names no module")
        if not self.lora and self.dtype in ("bfloat16", "float16"):
            found.append(
                f"full-parameter training keeps float32 master weights (bf16 compute is mixed precision): "
                f"drop dtype {self.dtype} or train a LoRA (--lora)"
            )
        return found


@dataclass
class RewardConfig:
    """The reward, by name from `rewards.REWARDS`: anomalyxl (R = s - lambda_tok s kappa - lambda_fail
    1[forced final], the paper) or composite (TimeMaster's w_fmt format + w_hard hard + w_soft soft)."""

    reward: str = setting("anomalyxl", "anomalyxl (penalised score, the paper) or composite (TimeMaster).")
    lambda_tok: float = setting(0.1, "anomalyxl: token-cost weight (applies when s > 0).", ge=0)
    lambda_fail: float = setting(0.25, "anomalyxl: forced-final penalty.", ge=0)
    format_weight: float = setting(0.1, "composite: weight of the format reward.", ge=0)
    hard_weight: float = setting(0.9, "composite: weight of the hard (class) reward.", ge=0)
    soft_weight: float | None = setting(
        None,
        "composite: weight of the judge's soft reward [0.5 with --judge (TimeMaster's public code), else 0].",
        ge=0,
    )
    judge: str | None = setting(None, "composite: the soft reward's LLM judge, provider/name (TimeMaster: GPT-4o).")
    judge_base_url: str | None = setting(None, "composite: an OpenAI-compatible server for the judge.")
    format_rule: str = setting(
        "public",
        "composite: how a reply is read: public (TimeMaster's public reward code) or paper (§3.3's ordered tags).",
        choices=FORMAT_RULES,
    )

    @property
    def soft(self) -> float:
        return self.soft_weight if self.soft_weight is not None else (0.5 if self.judge else 0.0)

    @property
    def scheme(self) -> Any:
        return REWARDS[self.reward]

    def problems(self) -> list[str]:
        if self.reward not in REWARDS:
            return [f"--reward must be one of {', '.join(REWARDS)}"]
        return settings.problems(self) + self.scheme.problems(self)


@dataclass
class TaskConfig:
    """The task stream: the family's training stream (`TaskFamily.training_stream`), scored by the
    family's scorer. A generator family (AnomalyXL) draws fresh tasks every step; a fixed set
    (TimerBed, the recordings, TimeSage, any family with a train split) cycles shuffled epochs."""

    family: str = setting(
        "anomalyxl", "The task family the episodes come from and whose scorer is the reward (name or module:attribute)."
    )
    data: list[str] = setting(
        factory=list, doc="A fixed set's training data: dataset folders or files (its train split); empty: the default."
    )
    categories: list[str] | None = setting(
        None, "Categories to train on; None: the family's (AnomalyXL: the five precise ones)."
    )
    lengths: list[int] | None = setting(
        None,
        "Generator families: series lengths; None: the preset's grid (paper: 16k-131k single, 32k/131k multi).",
        gt=0,
    )
    preset: str | None = setting(
        None, "Generator families: the grid (AnomalyXL: paper, or small with L 1024/2048); None: the family's default."
    )
    curriculum_fraction: float = setting(
        CURRICULUM_FRACTION,
        "Share of the steps that are a curriculum's warm phase (AnomalyXL: no anomaly-free cases).",
        ge=0,
        le=1,
    )
    warm_steps: int | None = setting(
        None,
        "The warm phase in steps; None: curriculum_fraction x steps. Families without a curriculum ignore it.",
        ge=0,
    )

    def problems(self) -> list[str]:
        return ["--categories names no category"] if self.categories is not None and not self.categories else []


@dataclass
class RolloutConfig:
    """Who generates the rollouts: the training model itself (hf) or vLLM (TRL's colocate or server mode)."""

    engine: str = setting(
        "hf", "Rollouts: hf (the training model), vllm-colocate or vllm-server (GPU).", choices=ENGINES
    )
    rollout_workers: int = setting(32, "Episodes in flight per process, each with its own kernel.", ge=1)
    reasoning_history: str = setting(
        "auto",
        "Later turns' context where the chat template drops earlier replies' reasoning (Qwen3-style). as-rendered: "
        "every turn's prompt is the template's render of the conversation, as eval renders it, each turn its own "
        "training row carrying the episode's advantage (rlm, tools); as-generated: one row per episode, extended by "
        "each reply as generated (warns); refuse: stop before the policy loads; auto: as-rendered where the template "
        "drops reasoning and the harness allows it.",
        choices=REASONING_HISTORY,
    )


@dataclass
class LaunchConfig:
    """How many processes on how many machines train (`accelerate launch`), and the GPUs they have."""

    num_processes: int = setting(
        1, "Processes (GPUs) in all, over every machine: more than 1 relaunches under accelerate.", ge=1, answers=False
    )
    accelerate_config: str | None = setting(None, "An accelerate YAML (experiments/grpo/accelerate/).", answers=False)
    num_machines: int = setting(
        1, "Machines the processes spread over (accelerate --num_machines).", ge=1, answers=False
    )
    machine_rank: int = setting(
        0, "This machine's rank, 0 on the main one (accelerate --machine_rank).", ge=0, answers=False
    )
    main_process_ip: str | None = setting(
        None, "The main machine's address (accelerate --main_process_ip).", answers=False
    )
    main_process_port: int | None = setting(
        None, "The main machine's port (accelerate --main_process_port).", ge=1, answers=False
    )
    gpu_memory_gib: float = setting(
        80.0, "GiB of memory per GPU, for the memory plan --check prints.", gt=0, answers=False
    )
    plan_for: str = setting(
        "gpu", "--check's memory plan: gpu (bf16) or cpu (fp32, peak RSS).", choices=("gpu", "cpu"), answers=False
    )


# seconds between the slowest rank's last episode and the collective it joins (the step's bookkeeping)
ROLLOUT_MARGIN_S = 120

# TRL fields that follow from tsbench's settings: filled by GRPOConfig.trl_values, never set by a config
DERIVED = {
    "per_device_train_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "batch_size / (micro_batch_size x processes)",
    "num_generations": "group_size",
    "generation_batch_size": "batch_size",
    "steps_per_generation": "batch_size",
    "max_completion_length": "max_turns x max_tokens (Dr. GRPO's constant normaliser)",
    "output_dir": "out",
    "use_vllm": "engine",
    "vllm_mode": "engine",
    "vllm_max_model_length": "max_seq_len",
    "reward_weights": "the reward's settings (lambda_tok, lambda_fail, format_weight, ...)",
    "bf16": "the device (bf16 mixed precision on a GPU)",
    "fp16": "the device",
    "use_cpu": "the device",
    "num_iterations": "one update per generation (strictly on-policy)",
    "shuffle_dataset": "the task keys' order (the curriculum)",
    "data_seed": "seed",
    "top_p": "plain temperature sampling",
    "top_k": "plain temperature sampling",
    "mask_truncated_completions": "answer_cut_replies (a capped reply keeps its tokens and scores 0)",
    "save_strategy": "save_steps",
    "logging_steps": "one log line per step",
    "disable_tqdm": "tsbench's progress line",
    "log_completions": "the run's rollouts journal",
    "dataloader_num_workers": "the task keys (no data to load)",
    "activation_checkpointing": "gradient_checkpointing",
}


@dataclass
class GRPOConfig(trl.GRPOConfig):
    """`tsbench train-grpo`. `batch_size` counts ROLLOUTS per optimizer step: tasks per step =
    batch_size / group_size (the paper: 128 rollouts = 16 tasks x G 8)."""

    # -- TRL's options, at the paper's values --------------------------------------------------
    max_steps: int = setting(300, "Optimizer steps.", ge=1, aliases=("--steps",))
    learning_rate: float = setting(1e-6, "Learning rate.", gt=0, aliases=("--lr",))
    lr_scheduler_type: str = setting("constant_with_warmup", "Learning-rate schedule (transformers SchedulerType).")
    weight_decay: float = setting(0.0, "AdamW weight decay.", ge=0)
    warmup_steps: int = setting(0, "Linear warmup steps (then constant).", ge=0)
    max_grad_norm: float = setting(1.0, "Max gradient norm.", gt=0)
    ddp_timeout: int = setting(
        1800,
        "Seconds a process waits in a collective (the rollouts' gather, an all-reduce) before the process group "
        "aborts: must outlast a step's slowest rank (--check compares it with the episode wall clock).",
        ge=1,
    )
    loss_type: str = setting(
        "dr_grpo",
        "TRL loss_type: dr_grpo (constant normaliser, the paper), grpo (TimeMaster eq. 7), ...",
        choices=LOSS_TYPES,
        aliases=("--loss",),
    )
    scale_rewards: str | None = setting(
        None,
        "none, group or batch [none for dr_grpo (no std division), group otherwise].",
        choices=("none", "group", "batch"),
    )
    advantage_std: str = setting(
        "sample", "Group sigma: sample (Bessel: TRL, TimeMaster's code) or population (eq. 6).", choices=ADVANTAGE_STDS
    )
    beta: float = setting(
        0.0, "KL weight to the reference (= the starting policy, the warm start if any); TimeMaster 0.001.", ge=0
    )
    epsilon: float = setting(0.2, "PPO clip epsilon.", gt=0, lt=1)
    epsilon_high: float | None = setting(None, "Upper clip epsilon (DAPO's clip-higher: 0.28) [epsilon].", gt=0, lt=1)
    temperature: float = setting(1.0, "Sampling temperature of the rollouts (and of TRL's log-probabilities).", gt=0)
    seed: int = setting(0, "Seed for tasks, sampling and init.", ge=0)
    gradient_checkpointing: bool = setting(True, "Recompute activations in the backward pass (less memory, more time).")
    save_steps: int = setting(50, "Checkpoint every N steps.", ge=1, aliases=("--save-every",))
    save_total_limit: int | None = setting(
        2, "Checkpoints kept (older ones are deleted).", ge=1, aliases=("--keep-checkpoints",)
    )
    report_to: list[str] = setting(
        factory=list,
        doc="Track the run: tensorboard and/or wandb (offline), under the run dir (pip install 'tsbench[tracking]').",
    )
    vllm_server_base_url: str | None = setting(
        "http://127.0.0.1:8000",
        "vllm-server: the `trl vllm-serve --model <weights>` URL.",
        aliases=("--vllm-server-url",),
    )
    vllm_gpu_memory_utilization: float = setting(
        0.3, "vllm-colocate: share of the GPU vLLM may take.", gt=0, le=1, aliases=("--vllm-gpu-memory",)
    )
    vllm_importance_sampling_correction: bool = setting(
        True, "vLLM engines: correct the sampler/trainer logprob mismatch (off: no correction)."
    )
    vllm_importance_sampling_mode: str = setting(
        "token_truncate",
        "vLLM engines: token_truncate (ratios clipped at the cap), token_mask, sequence_truncate or sequence_mask "
        "(TRL's default: zero-weights long episodes).",
        choices=IMPORTANCE_SAMPLING,
        aliases=("--importance-sampling",),
    )
    vllm_importance_sampling_clip_max: float | None = setting(
        3.0, "vLLM engines: the importance ratio's upper bound C_max.", gt=1, aliases=("--importance-sampling-cap",)
    )

    # -- tsbench's own -------------------------------------------------------------------------
    group_size: int = setting(8, "Rollouts per task, G (advantages are relative to the group).", ge=2)
    batch_size: int = setting(
        128, "Rollouts per optimizer step; tasks per step = batch / G (the paper: 16 x G 8).", ge=1
    )
    micro_batch_size: int = setting(
        1, "Sequences per forward/backward on one process (accumulation fills the rest).", ge=1
    )
    max_seq_len: int = setting(65536, "Tokens per episode (first prompt + every turn).", ge=2)
    refill_rounds: int = setting(
        0,
        "Zero-variance groups: 0 masks them out of the loss (the paper); N > 0 replays each with a fresh task, up to "
        "N rounds (DAPO's dynamic sampling), before masking what is still flat.",
        ge=0,
    )
    harness: str = setting("rlm", "The harness episodes run in (rlm, single-pass-text, tools, ...).")
    out: str | None = setting(None, "Run dir [runs/grpo__<model>].", answers=False)
    resume: bool = setting(False, "Continue a run from its last checkpoint (same settings).", answers=False)
    log_rollouts: bool = setting(True, "Write every rollout's transcript to the run dir.", answers=False)
    eval_every: int = setting(0, "Every N steps play the held-out split with the current policy (0: never).", ge=0)
    eval_split: str = setting("val", "The split periodic eval plays: rows the policy never trains on.")
    eval_data: list[str] = setting(
        factory=list, doc="Dataset folders or files the held-out split lies beside; empty: --data (tasks.data)."
    )
    eval_limit: int = setting(16, "Held-out rows each periodic eval plays: the split's first N, every time.", ge=1)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    rewards: RewardConfig = field(default_factory=RewardConfig)
    tasks: TaskConfig = field(default_factory=TaskConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    harness_config: HarnessSettings = field(default_factory=lambda: HarnessSettings(max_tokens=4096))
    memory: MemorySettings = field(default_factory=MemorySettings)

    @classmethod
    def from_values(cls, values: dict, *, where: str = "setting") -> Any:
        """Built from TOML and flag values: its own settings, then its harness's (harness/settings.py)."""
        from tsbench.harness.settings import build_run

        return build_run(cls, values, where=where)

    def __post_init__(self) -> None:
        """Nothing of TRL's yet: its __post_init__ sets up devices and the distributed state, and checks
        the batch arithmetic against the world size; `for_launch` runs it once that is known."""

    # -- what follows from the settings --------------------------------------------------------
    @property
    def tasks_per_step(self) -> int:
        return self.batch_size // self.group_size

    @property
    def warm_steps(self) -> int:
        """The curriculum's cut-over: steps 1..warm_steps draw no anomaly-free cases."""
        if self.tasks.warm_steps is not None:
            return self.tasks.warm_steps
        return int(round(self.max_steps * self.tasks.curriculum_fraction))

    @property
    def reward_scaling(self) -> str:
        return self.scale_rewards or ("none" if self.loss_type == "dr_grpo" else "group")

    def episode_setup(self) -> tuple[Any, Any]:
        """(the harness episodes play, its own settings: an instance of the class it declares), sampling at
        TRL's temperature, the one the loss scores. The harness sits inside TimeClaw's memory wrapper when
        [memory] names a bank, as eval plays it (timeclaw/memory_wrapper.py); a setting it does not read is
        a UserError."""
        from tsbench.timeclaw.memory_wrapper import episode_setup

        settings = dataclasses.replace(self.harness_config, temperature=self.temperature)
        return episode_setup(self.harness, settings, self.memory)

    def episode_tokens(self) -> int:
        """The most tokens one episode can generate: Dr. GRPO's constant loss normaliser."""
        per_reply = self.harness_config.max_tokens or self.max_seq_len
        return min(self.max_seq_len, self.harness_config.max_turns * per_reply)

    def trl_values(self, *, world: int, rows: int, on_gpu: bool, reward_weights: list[float]) -> dict[str, Any]:
        """The DERIVED fields for `world` processes and `rows` training rows per episode.

        One generation per optimizer step (strictly on-policy). With rows > 1 (reasoning_history
        as-rendered: one row per turn, rollouts.Environment) TRL's group is G x rows rows that all carry
        their episode's reward, so its group mean (and Dr. GRPO's R - mean) is the episodes' own; a forward
        still takes micro_batch_size rows (accumulation x rows), and the constant normaliser is divided by
        rows so the summed token loss is scaled as with one row."""
        accumulation = self.batch_size // (self.micro_batch_size * world) * rows
        engine = self.rollout.engine
        return {
            "per_device_train_batch_size": self.micro_batch_size,
            "gradient_accumulation_steps": accumulation,
            "num_generations": self.group_size * rows,
            "generation_batch_size": None,
            "steps_per_generation": None,
            "max_completion_length": max(1, self.episode_tokens() // rows),
            "output_dir": str(self.run_dir() / "checkpoints"),
            "use_vllm": engine != "hf",
            "vllm_mode": "server" if engine == "vllm-server" else "colocate",
            "vllm_max_model_length": self.max_seq_len,
            "reward_weights": list(reward_weights),
            "bf16": on_gpu,
            "fp16": False,
            "use_cpu": not on_gpu,
            "num_iterations": 1,
            "shuffle_dataset": False,
            "data_seed": self.seed,
            "top_p": 1.0,
            "top_k": 0,
            "mask_truncated_completions": False,
            "save_strategy": "steps",
            "logging_steps": 1,
            "disable_tqdm": True,
            "log_completions": False,
            "dataloader_num_workers": 0,
            "scale_rewards": self.reward_scaling,
            "report_to": check_targets(self.report_to) or "none",
            # transformers 5 reads activation_checkpointing (gradient_checkpointing is its deprecated alias)
            "activation_checkpointing": self.gradient_checkpointing,
            "activation_checkpointing_kwargs": self.activation_checkpointing_kwargs
            or self.gradient_checkpointing_kwargs
            or ({"use_reentrant": False} if self.gradient_checkpointing else None),
            # the KL reference of a full-parameter run on a GPU in bf16 (TRL builds it in the policy's dtype)
            "model_init_kwargs": (
                {"dtype": "bfloat16", **(self.model_init_kwargs or {})}
                if on_gpu and not self.policy.lora and isinstance(self.model_init_kwargs, dict | None)
                else self.model_init_kwargs
            ),
        }

    def for_launch(self, *, world: int, rows: int, on_gpu: bool, reward_weights: list[float]) -> GRPOConfig:
        """A copy with the DERIVED fields filled and TRL's own __post_init__ run: what GRPOTrainer gets.
        Under `accelerate launch` with DeepSpeed this builds the plugin that makes ZeRO-3's zero3_init_flag
        apply, so it runs before the policy's weights load (grpo.build_trainer)."""
        args = copy.copy(self)
        for name, value in self.trl_values(
            world=world, rows=rows, on_gpu=on_gpu, reward_weights=reward_weights
        ).items():
            setattr(args, name, value)
        try:
            trl.GRPOConfig.__post_init__(args)
        except ValueError as exc:
            raise UserError(f"TRL refuses these settings: {exc}") from None
        return args

    # -- the task stream -----------------------------------------------------------------------
    def training_request(self) -> TrainingRequest:
        """What the family's training stream is asked for."""
        return TrainingRequest(
            seed=self.seed,
            steps=self.max_steps,
            tasks_per_step=max(self.tasks_per_step, 1),
            data=tuple(self.tasks.data),
            categories=tuple(self.tasks.categories) if self.tasks.categories else None,
            warm_steps=self.warm_steps,
            options={
                k: v for k, v in (("preset", self.tasks.preset), ("lengths", self.tasks.lengths)) if v is not None
            },
        )

    def training_stream(self):
        """The family's stream of training tasks; a request it cannot honour is a UserError."""
        from tsbench.tasks import get_taskset

        return get_taskset(self.tasks.family).training_stream(self.training_request())

    def run_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        slug = self.policy.model.removeprefix("local/").strip("/").replace("/", "_").replace(":", "_")
        return Path("runs") / f"grpo__{slug}"

    # -- checks that span settings (each setting's own range is declared with it) ---------------
    def batch_problems(self, world: int) -> list[str]:
        per_process = self.batch_size // max(world, 1)
        if self.batch_size % self.group_size or self.batch_size % world or per_process % self.group_size:
            return [
                f"--batch-size ({self.batch_size} rollouts) must split into whole groups of {self.group_size} "
                f"on each of {world} process(es)"
            ]
        if per_process % self.micro_batch_size:
            return [
                f"--micro-batch-size ({self.micro_batch_size}) must divide the {per_process} rollouts "
                "each process trains on per step"
            ]
        return []

    def harness_problems(self) -> list[str]:
        from tsbench.harness import HARNESSES, get_harness

        harness = get_harness(self.harness) if self.harness in HARNESSES else None
        if harness is None or harness.reference:
            models = ", ".join(h for h in HARNESSES if not get_harness(h).reference)
            return [f"--harness must be a model harness: {models}"]
        found = []
        try:  # the harness's own settings: one it does not read (memory's where it has no memory) is refused
            settings = self.episode_setup()[1]
        except UserError as error:
            found.append(str(error))
            settings = None
        if settings is not None and settings.recursion_depth > 0:
            found.append(
                "train-grpo plays depth 0: a sub-call's conversation is not a continuation of the policy's "
                "token ids, so every sub-call would fail (set depth = 0)"
            )
        if self.harness_config.temperature is not None:
            found.append("the rollouts sample at TRL's temperature (temperature under [grpo]), not the harness's")
        return found

    def rollout_bound_s(self, world: int) -> float | None:
        """The longest one process can spend playing one step's episodes (None: no episode wall clock):
        its episodes in waves of rollout_workers, each at most episode_wall_s, every refill round again."""
        wall = self.harness_config.episode_wall_s
        if wall is None:
            return None
        per_rank = max(self.batch_size // max(world, 1), 1)
        waves = -(-per_rank // min(self.rollout.rollout_workers, per_rank))
        return waves * wall * (1 + self.refill_rounds)

    def timeout_problems(self, world: int) -> list[str]:
        """The ranks meet in gather_object after their rollouts: a rank that can play longer than the group
        waits for a collective is aborted there by the watchdog, hours into a run."""
        bound = self.rollout_bound_s(world)
        if world < 2 or bound is None or bound + ROLLOUT_MARGIN_S <= self.ddp_timeout:
            return []
        return [
            f"a step's rollouts can take {bound:,.0f} s on one process (episode_wall_s x waves x refill rounds), "
            f"longer than ddp_timeout {self.ddp_timeout:,} s less a {ROLLOUT_MARGIN_S} s margin: the other "
            "processes would be aborted waiting for it (raise ddp_timeout or lower episode_wall_s)"
        ]

    def scaling_problems(self, rows: int) -> list[str]:
        """With one training row per turn TRL's group holds G x rows copies of the episodes' rewards: its
        mean is the episodes' own, its std is not (taken over G x rows values, not G)."""
        if rows > 1 and self.reward_scaling != "none":
            return [
                f"scale_rewards {self.reward_scaling} with {rows} training rows per episode (reasoning_history "
                "as-rendered) would divide by a std over the rows, not the group's episodes: use scale_rewards none "
                "(Dr. GRPO) or reasoning_history as-generated"
            ]
        if self.advantage_std == "population" and self.reward_scaling != "group":
            return [
                f"advantage_std population divides by a group's sigma: scale_rewards {self.reward_scaling} has none"
            ]
        return []

    def derived_problems(self) -> list[str]:
        """A DERIVED field a config set: refused, naming the setting it follows from."""
        found = []
        for name, source in DERIVED.items():
            spec = trl.GRPOConfig.__dataclass_fields__[name]
            default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default
            if getattr(self, name) != default:
                found.append(f"{name} is set by tsbench from {source}; set that instead")
        if self.top_k != 0:  # TRL's sampling top_k shadows [memory]'s under [grpo]
            found[-1] += " (the precedents a memory bank retrieves are [grpo.memory] top_k)"
        return found

    def family_problems(self) -> list[str]:
        from tsbench.tasks import get_taskset

        try:  # the family refuses what it cannot draw or play here, before any weights load
            family = get_taskset(self.tasks.family)
            if family.harnesses is not None and self.harness not in family.harnesses:
                return [f"family {family.name} is played by {', '.join(family.harnesses)}, not {self.harness}"]
            self.training_stream()
        except UserError as error:
            return [str(error)]
        return []

    def validate(self, world_size: int = 1) -> None:
        """Every problem with these settings in one line (exit 2), before anything loads."""
        found = self.policy.problems() + self.rewards.problems() + self.tasks.problems()
        found += self.batch_problems(world_size) + self.harness_problems() + self.derived_problems()
        found += self.timeout_problems(world_size)
        if self.epsilon_high is not None and self.epsilon_high < self.epsilon:
            found.append(f"epsilon_high must lie in [epsilon ({self.epsilon}), 1)")
        if not self.tasks.problems():
            found += self.family_problems()
        try:
            check_targets(self.report_to)
        except UserError as error:
            found.append(str(error))
        if found:
            raise UserError("; ".join(found))

    def to_dict(self) -> dict:
        """TrainingArguments' dict (what TRL's trackers log) with tsbench's sections as plain dicts."""
        out = super().to_dict()
        for name in ("policy", "rewards", "tasks", "rollout", "launch", "harness_config", "memory"):
            out[name] = dataclasses.asdict(getattr(self, name))
        return out
