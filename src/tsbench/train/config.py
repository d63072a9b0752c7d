"""Training settings: one dataclass per concern, nested in `GRPOConfig` and `SFTConfig`.

Defaults are the papers' (GRPO: timerlm-anomalyxl §4.1, Qwen3.5-4B, full parameters; SFT:
Appendix C). Every field is a TOML key (flat under [grpo] / [sft], or as a nested table such as
[grpo.rewards]) and the ones users change are CLI flags; `tsbench.core.config.build` fills them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from tsbench.core.errors import UserError
from tsbench.core.tracking import check_targets
from tsbench.harness.settings import HarnessConfig
from tsbench.models.tslm.settings import TSLMSettings
from tsbench.tasks.base import TrainingRequest

REWARDS = ("anomalyxl", "composite")
LOSSES = ("dr_grpo", "grpo")
ENGINES = ("hf", "vllm-colocate", "vllm-server")
REASONING_HISTORY = ("auto", "as-rendered", "as-generated", "refuse")
# TRL's vLLM importance-sampling modes (trl GRPOConfig vllm_importance_sampling_mode), and "none": no correction
IMPORTANCE_SAMPLING = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask", "none")
CURRICULUM_FRACTION = 220 / 300  # anomaly-free cases withheld for the first 220 of 300 steps


@dataclass
class PolicyConfig:
    """Which weights train: every parameter (lora = 0) or a LoRA adapter of rank `lora`."""

    model: str = ""
    """Policy: local/smollm2-135m, local/<dir> (a model or an SFT adapter: the warm start), a path, or a hub id."""
    lora: int = 0
    """LoRA rank; 0 trains every parameter (the paper's run)."""
    lora_alpha: int | None = None
    """LoRA alpha [2 x rank]."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    lora_target: str = "all-linear"
    """LoRA target modules (comma-separated, or all-linear)."""
    dtype: str | None = None
    """Stored weights' dtype: float32, bfloat16 or float16 [float32 for full-parameter training (the
    optimizer's master copy; GPU compute is bf16 mixed precision), bfloat16 for a LoRA's base on GPU]."""
    gradient_checkpointing: bool = True
    """Recompute activations in the backward pass (less memory, more time)."""

    def targets(self) -> str | list[str]:
        names = [t.strip() for t in self.lora_target.split(",") if t.strip()]
        return "all-linear" if names == ["all-linear"] else names

    def problems(self) -> list[str]:
        found = []
        if not self.model:
            found.append("--model is required")
        if self.lora < 0 or (self.lora_alpha is not None and self.lora_alpha <= 0):
            found.append("--lora takes a rank >= 1 (0 trains every parameter) and lora_alpha must be > 0")
        if not 0 <= self.lora_dropout < 1:
            found.append("lora_dropout must lie in [0, 1)")
        if self.lora and not self.targets():
            found.append("lora_target names no module")
        if self.dtype not in (None, "float32", "bfloat16", "float16"):
            found.append("dtype must be float32, bfloat16 or float16")
        elif not self.lora and self.dtype in ("bfloat16", "float16"):
            found.append(
                f"full-parameter training keeps float32 master weights (bf16 compute is mixed precision): "
                f"drop dtype {self.dtype} or train a LoRA (--lora)"
            )
        return found


@dataclass
class RewardConfig:
    """`anomalyxl`: R = s - lambda_tok * s * kappa - lambda_fail * 1[forced final] (the paper).
    `composite`: TimeMaster's w_fmt * format + w_hard * hard + w_soft * soft (an LLM judge)."""

    reward: str = "anomalyxl"
    """anomalyxl (penalised score, the paper) or composite (TimeMaster)."""
    lambda_tok: float = 0.1
    """anomalyxl: token-cost weight (applies when s > 0)."""
    lambda_fail: float = 0.25
    """anomalyxl: forced-final penalty."""
    format_weight: float = 0.1
    """composite: weight of the format reward."""
    hard_weight: float = 0.9
    """composite: weight of the hard (class) reward."""
    soft_weight: float | None = None
    """composite: weight of the judge's soft reward [0.5 with --judge (TimeMaster's public code), else 0]."""
    judge: str | None = None
    """composite: the soft reward's LLM judge, provider/name (TimeMaster: GPT-4o)."""
    judge_base_url: str | None = None
    """composite: an OpenAI-compatible server for the judge."""

    @property
    def soft(self) -> float:
        return self.soft_weight if self.soft_weight is not None else (0.5 if self.judge else 0.0)

    def problems(self) -> list[str]:
        found = []
        if self.reward not in REWARDS:
            found.append(f"--reward must be one of {', '.join(REWARDS)}")
        if min(self.lambda_tok, self.lambda_fail, self.format_weight, self.hard_weight, self.soft) < 0:
            found.append("reward weights and penalties must be >= 0")
        if self.reward == "composite" and self.soft > 0 and not self.judge:
            found.append("--reward composite with a soft weight needs --judge <provider/name>")
        if self.judge and self.reward != "composite":
            found.append("--judge only scores the composite reward's soft part (add --reward composite)")
        return found


@dataclass
class TaskConfig:
    """The task stream: the family's training stream (`TaskFamily.training_stream`), scored by the
    family's scorer. A generator family (AnomalyXL) draws fresh tasks every step; a fixed set
    (TimerBed, the recordings, TimeSage, any family with a train split) cycles shuffled epochs."""

    family: str = "anomalyxl"
    """The task family the episodes come from and whose scorer is the reward (name or module:attribute)."""
    data: list[str] = field(default_factory=list)
    """A fixed set's training data: dataset folders or files (its train split); empty: the family's default."""
    categories: list[str] | None = None
    """Categories to train on; None: the family's (AnomalyXL: the five precise ones)."""
    lengths: list[int] | None = None
    """Generator families: series lengths; None: the preset's grid (paper: 16k-131k single, 32k/131k multi)."""
    preset: str | None = None
    """Generator families: the grid (AnomalyXL: paper, or small with L 1024/2048); None: the family's default."""
    curriculum_fraction: float = CURRICULUM_FRACTION
    """Share of the steps that are a curriculum's warm phase (AnomalyXL: no anomaly-free cases)."""
    warm_steps: int | None = None
    """The warm phase in steps; None: curriculum_fraction x steps. Families without a curriculum ignore it."""

    def problems(self) -> list[str]:
        found = []
        if self.categories is not None and not self.categories:
            found.append("--categories names no category")
        if not 0.0 <= self.curriculum_fraction <= 1.0 or (self.warm_steps is not None and self.warm_steps < 0):
            found.append("curriculum_fraction must lie in [0, 1] and warm_steps be >= 0")
        return found


@dataclass
class RolloutConfig:
    """Who generates the rollouts: the training model itself (hf) or vLLM (TRL's colocate or server mode)."""

    engine: str = "hf"
    """Rollouts: hf (the training model), vllm-colocate or vllm-server (GPU)."""
    vllm_server_url: str = "http://127.0.0.1:8000"
    """vllm-server: the `trl vllm-serve --model <weights>` URL."""
    vllm_gpu_memory: float = 0.3
    """vllm-colocate: share of the GPU vLLM may take."""
    rollout_workers: int = 32
    """Episodes in flight per process, each with its own kernel."""
    importance_sampling: str = "token_truncate"
    """vLLM engines: correct the sampler/trainer logprob mismatch per token (token_truncate: ratios clipped at
    the cap), token_mask, sequence_truncate, sequence_mask (TRL's default: zero-weights long episodes) or none."""
    importance_sampling_cap: float = 3.0
    """vLLM engines: the importance ratio's upper bound C_max (clipped by *_truncate, masked by *_mask)."""
    reasoning_history: str = "auto"
    """Later turns' context where the chat template drops earlier replies' reasoning (Qwen3-style), so that eval's
    later turns show less than the reply ids as generated. as-rendered: every turn's prompt is the template's render
    of the conversation, as eval renders it, and each turn is its own training row carrying the episode's advantage
    (rlm, tools); as-generated: one row per episode, extended by each reply as generated (warns); refuse: stop
    before the policy loads; auto: as-rendered where the template drops reasoning and the harness allows it."""

    def problems(self) -> list[str]:
        found = []
        if self.reasoning_history not in REASONING_HISTORY:
            found.append(f"reasoning_history must be one of {', '.join(REASONING_HISTORY)}")
        if self.engine not in ENGINES:
            found.append(f"--engine must be one of {', '.join(ENGINES)}")
        if self.rollout_workers < 1 or not 0 < self.vllm_gpu_memory <= 1:
            found.append("rollout_workers must be >= 1 and vllm_gpu_memory in (0, 1]")
        if self.importance_sampling not in IMPORTANCE_SAMPLING or not self.importance_sampling_cap > 1:
            found.append(
                f"importance_sampling must be one of {', '.join(IMPORTANCE_SAMPLING)} and importance_sampling_cap > 1"
            )
        return found


@dataclass
class LaunchConfig:
    """How many processes train (`accelerate launch`), and with which accelerate config."""

    num_processes: int = 1
    """Processes (GPUs): more than 1 relaunches under accelerate."""
    accelerate_config: str | None = None
    """An accelerate YAML (experiments/grpo/accelerate/)."""


def _training_harness() -> HarnessConfig:
    return HarnessConfig(max_tokens=4096, temperature=1.0)


@dataclass
class GRPOConfig:
    """`tsbench train-grpo`. `batch_size` counts ROLLOUTS per optimizer step: tasks per step =
    batch_size / group_size (the paper: 128 rollouts = 16 tasks x G 8)."""

    steps: int = 300
    """Optimizer steps."""
    group_size: int = 8
    """Rollouts per task, G."""
    batch_size: int = 128
    """Rollouts per optimizer step; tasks per step = batch / G (the paper: 128 = 16 tasks x G 8)."""
    micro_batch_size: int = 1
    """Sequences per forward/backward on one process (gradient accumulation fills the rest)."""
    max_seq_len: int = 65536
    """Tokens per episode (first prompt + every turn)."""
    lr: float = 1e-6
    """Learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    warmup_steps: int = 0
    """Linear warmup steps (then constant)."""
    max_grad_norm: float = 1.0
    """Max gradient norm."""
    loss: str = "dr_grpo"
    """TRL loss_type: dr_grpo (constant normaliser, the paper) or grpo (TimeMaster eq. 7)."""
    scale_rewards: str | None = None
    """none, group or batch [none for dr_grpo (no std division), group for grpo]."""
    beta: float = 0.0
    """KL weight to the reference (= the starting policy, the warm start if any); TimeMaster 0.001."""
    epsilon: float = 0.2
    """PPO clip epsilon."""
    epsilon_high: float | None = None
    """Upper clip epsilon (DAPO's clip-higher: 0.28) [epsilon]."""
    refill_rounds: int = 0
    """Zero-variance groups: 0 masks them out of the loss (the paper); N > 0 replays each with a fresh task,
    up to N rounds (DAPO's dynamic sampling), before masking what is still flat."""
    harness: str = "rlm"
    """The harness episodes run in (rlm, single-pass-text, tools, ...)."""
    out: str | None = None
    """Run dir [runs/grpo__<model>]."""
    resume: bool = False
    """Continue a run from its last checkpoint (same settings)."""
    save_every: int = 50
    """Checkpoint every N steps."""
    keep_checkpoints: int = 2
    """Checkpoints kept (older ones are deleted)."""
    log_rollouts: bool = True
    """Write every rollout's transcript to the run dir."""
    report_to: list[str] = field(default_factory=list)
    """Track the run: tensorboard and/or wandb (offline), under the run dir (pip install 'tsbench[tracking]')."""
    eval_every: int = 0
    """Every N steps play the held-out split with the current policy and log eval_mean_score (0: never)."""
    eval_split: str = "val"
    """The split periodic eval plays: rows the policy never trains on."""
    eval_data: list[str] = field(default_factory=list)
    """Dataset folders or files the held-out split lies beside; empty: --data (tasks.data)."""
    eval_limit: int = 16
    """Held-out rows each periodic eval plays: the split's first N, the same rows every time."""
    seed: int = 0
    """Seed for tasks, sampling and init."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    rewards: RewardConfig = field(default_factory=RewardConfig)
    tasks: TaskConfig = field(default_factory=TaskConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    launch: LaunchConfig = field(default_factory=LaunchConfig)
    harness_config: HarnessConfig = field(default_factory=_training_harness)

    @property
    def tasks_per_step(self) -> int:
        return self.batch_size // self.group_size

    @property
    def temperature(self) -> float:
        return float(self.harness_config.temperature)

    @property
    def warm_steps(self) -> int:
        """The curriculum's cut-over: steps 1..warm_steps draw no anomaly-free cases."""
        if self.tasks.warm_steps is not None:
            return self.tasks.warm_steps
        return int(round(self.steps * self.tasks.curriculum_fraction))

    @property
    def reward_scaling(self) -> str:
        return self.scale_rewards or ("none" if self.loss == "dr_grpo" else "group")

    def episode_tokens(self) -> int:
        """The most tokens one episode can generate: Dr. GRPO's constant loss normaliser."""
        per_reply = self.harness_config.max_tokens or self.max_seq_len
        return min(self.max_seq_len, self.harness_config.max_turns * per_reply)

    def training_request(self) -> TrainingRequest:
        """What the family's training stream is asked for."""
        return TrainingRequest(
            seed=self.seed,
            steps=self.steps,
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

    def validate(self, world_size: int = 1) -> None:
        from tsbench.harness import HARNESSES, get_harness

        found = self.policy.problems() + self.rewards.problems() + self.tasks.problems() + self.rollout.problems()
        if self.group_size < 2:
            found.append("--group-size must be >= 2 (advantages are relative to the group)")
        per_process = self.batch_size // max(world_size, 1)
        if self.batch_size % self.group_size or self.batch_size % world_size or per_process % self.group_size:
            found.append(
                f"--batch-size ({self.batch_size} rollouts) must split into whole groups of {self.group_size} "
                f"on each of {world_size} process(es)"
            )
        elif per_process % self.micro_batch_size:
            found.append(
                f"--micro-batch-size ({self.micro_batch_size}) must divide the {per_process} rollouts "
                "each process trains on per step"
            )
        if self.steps < 1 or self.micro_batch_size < 1 or self.max_seq_len < 2:
            found.append("--steps and --micro-batch-size must be >= 1 and --max-seq-len >= 2")
        if self.loss not in LOSSES or self.reward_scaling not in ("none", "group", "batch"):
            found.append(f"--loss must be one of {', '.join(LOSSES)} and scale_rewards none, group or batch")
        if not 0 < self.epsilon < 1 or self.beta < 0 or self.lr <= 0 or self.warmup_steps < 0:
            found.append("need 0 < epsilon < 1, beta >= 0, lr > 0 and warmup_steps >= 0")
        if self.refill_rounds < 0:
            found.append("refill_rounds must be >= 0")
        if self.epsilon_high is not None and not self.epsilon <= self.epsilon_high < 1:
            found.append(f"epsilon_high must lie in [epsilon ({self.epsilon}), 1)")
        harness = get_harness(self.harness) if self.harness in HARNESSES else None
        try:  # the harness's own settings: a setting it does not read (or [memory], not played here) is refused
            settings = harness.settings(self.harness_config) if harness is not None else None
        except UserError as error:
            found.append(str(error))
            settings = None
        if settings is not None and settings.recursion_depth > 0:
            found.append(
                "train-grpo plays depth 0: a sub-call's conversation is not a continuation of the policy's "
                "token ids, so every sub-call would fail (set depth = 0)"
            )
        # -image harnesses: grpo.check_images refuses a text-only policy (it needs the model's config)
        if not self.harness_config.temperature or self.harness_config.temperature <= 0:
            found.append("training samples at a temperature > 0 (--temperature)")
        if self.save_every < 1 or self.keep_checkpoints < 1:
            found.append("save_every and keep_checkpoints must be >= 1")
        if self.eval_every < 0 or self.eval_limit < 1:
            found.append("eval_every must be >= 0 and eval_limit >= 1")
        if harness is None or harness.reference:
            models = [h for h in HARNESSES if not get_harness(h).reference]
            found.append(f"--harness must be a model harness: {', '.join(models)}")
        if self.launch.num_processes < 1:
            found.append("--num-processes must be >= 1")
        if not self.tasks.problems():
            from tsbench.tasks import get_taskset

            try:  # the family refuses what it cannot draw or play here, before any weights load
                family = get_taskset(self.tasks.family)
                if family.harnesses is not None and self.harness not in family.harnesses:
                    found.append(f"family {family.name} is played by {', '.join(family.harnesses)}, not {self.harness}")
                self.training_stream()
            except UserError as error:
                found.append(str(error))
        try:
            check_targets(self.report_to)
        except UserError as error:
            found.append(str(error))
        if found:
            raise UserError("; ".join(found))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


SINGLE_PASS = "single-pass-text"
RLM_TRAJECTORIES = "rlm-trajectories"
TIMEMASTER_TRACES = "timemaster-traces"  # <think>/<class> traces: TimeMaster's warm start (train/sft_timemaster.py)
FORMATS = (SINGLE_PASS, RLM_TRAJECTORIES, TIMEMASTER_TRACES)


def _sft_policy() -> PolicyConfig:
    return PolicyConfig(
        lora=16, lora_alpha=32, lora_dropout=0.05, lora_target="q_proj,v_proj", gradient_checkpointing=False
    )


@dataclass
class SFTConfig:
    """`tsbench sft-baseline` for a language model; defaults are the paper's (Appendix C)."""

    format: str = SINGLE_PASS
    """LMs: single-pass-text, rlm-trajectories or timemaster-traces (JSONL files or teacher eval runs; VLMs too)."""
    family: str = "anomalyxl"
    """The task family whose rows (single-pass-text) and scorer (validation) SFT uses (name or module:attribute)."""
    data: list[str] = field(default_factory=list)
    """single-pass-text: one dataset dir holding the family's train (and val) split [data/anomalyxl/seed42];
    rlm-trajectories: one or more eval run dirs (results/<run>)."""
    regime: str | None = None
    """AnomalyXL: precise or coarse (rlm-trajectories also: both) [precise | both]; another family: one
    value of its rows' regime [all rows]."""
    epochs: int = 5
    """Epochs."""
    lr: float = 1e-4
    """Learning rate."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Max gradient norm (0: no clipping)."""
    warmup: float = 0.03
    """Warmup: this fraction of the optimizer steps, rounded down (a 1-step run does not warm up)."""
    batch_size: int = 1
    """Batch size."""
    patience: int = 3
    """Epochs without a lower val loss before stopping."""
    val_rows: int = 500
    """Validation rows."""
    train_rows: int | None = None
    """Training rows, spread round-robin over categories [all; the paper: ~5,000]."""
    min_score: float = 0.5
    """rlm-trajectories: keep episodes scoring at least this."""
    include_test_split: bool = False
    """rlm-trajectories: allow episodes on test rows (contaminates the benchmark)."""
    max_seq_len: int | None = None
    """Longest example in tokens; longer ones are dropped [the model's context]."""
    text_budget_chars: int | None = None
    """single-pass-text: serialized characters [fitted to max_seq_len]."""
    val_max_new_tokens: int = 128
    """Tokens generated per validation example."""
    out: str | None = None
    """Output dir [models/sft-<model>-<format>-<regime>]."""
    report_to: list[str] = field(default_factory=list)
    """Track the run: tensorboard and/or wandb (offline), under the out dir (pip install 'tsbench[tracking]')."""
    seed: int = 0
    """LoRA init, shuffling and held-out trajectories."""
    overwrite: bool = False
    """Replace an existing output dir."""
    policy: PolicyConfig = field(default_factory=_sft_policy)
    tslm: TSLMSettings = field(default_factory=TSLMSettings)  # --model tslm/<arch> only ([sft.tslm])
