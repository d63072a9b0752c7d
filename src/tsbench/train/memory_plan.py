"""A training run's memory per GPU, planned from the model's config and the launch, before anything loads.

Pure arithmetic over a `ModelShape` (parameter counts read off the model built on the meta device,
attention and state sizes off its config) and a `Strategy` (read off the accelerate YAML). The
numbers are a plan, not a measurement: bytes per parameter as each strategy keeps them, the
activations of one micro-batch (gradient checkpointing keeps each layer's input; the layer being
recomputed holds its own), TRL's fused LM head (no (tokens, vocab) logits), and the rollouts' KV
cache (hf: every episode in flight at max_seq_len, worst case; vLLM colocate: the share it is given,
weights first, the rest KV cache).

Bytes per parameter:
  full training, DDP / one GPU / FSDP: fp32 weights 4, fp32 grads 4, AdamW m and v 8 (FSDP shards all three);
  full training, DeepSpeed (bf16): bf16 weights 2, bf16 grads 2, fp32 master + m + v 12 (ZeRO-1 shards the
  optimizer, ZeRO-2 also the grads, ZeRO-3 also the weights);
  LoRA: the frozen base in bf16 (2; fp32 on CPU), the adapter at 4 + 4 + 8;
  the KL reference (beta > 0, full training): a second copy in bf16, sharded under ZeRO-3 / FSDP; none for
  a LoRA (TRL disables the adapter instead).

What the engine holds beside those, on a GPU:
  ZeRO buffers (full training under DeepSpeed): the model states are taken as DeepSpeed's own estimator
  counts them (`estimate_zero2/3_model_states_mem_needs`, no offload): ZeRO-3 18 bytes a parameter over
  the processes plus the largest layer gathered in fp32 (4 bytes a parameter of it); ZeRO-2 4 bytes a
  parameter whole plus 16 over the processes. The part is what that adds to weights + grads + optimizer
  above (its fp32 gradient partitions, the unsharded bf16 gradients ZeRO-2 reduces from, the gathered layer).
  ZeRO-3 also keeps up to stage3_max_live_parameters (1e9 by default) gathered in bf16.
  context: the CUDA context and NCCL's communicator buffers of a process (an allowance).

On CPU (`plan_for = "cpu"`: the plan is the process's peak RSS): weights, activations and the rollouts' KV
cache in fp32, no context, and two measured parts. Measured on experiments/grpo/cpu_smoke.toml (one step,
SmolLM2-135M, LoRA 8, 8 rlm episodes at max_seq_len 2,048; RSS sampled every 0.2 s, 2 shared cores):
  phase (RSS GiB)          measured                 planned
  imports + checks         0.55                     runtime 0.55 (CPU_RUNTIME_GIB, this measurement)
  weights loaded           0.59 (bf16 file, mmapped) weights 0.51 (fp32 once trained)
  rollouts peak            1.82 = +1.22             weights 0.51 + kv cache 0.70 = 1.21
  update start / peak      1.56 / 2.64              glibc keeps what the rollouts freed (1.56 after them, 1.91
                                                    at exit), so the KV cache and the update both count
  update, above its start  1.08                     activations 0.22 + grads/optimizer 0.03 + backward 0.79
  whole run peak           2.64 (bench: 2.70-3.01)  2.8
The backward part is the gap that run left (0.86 GiB at 2,048 tokens x 576 hidden x 30 layers: about 6 fp32
hidden states per layer and token), kept as CPU_BACKWARD_COPIES: calibrated on this one model, not derived.
Jailed kernels are other processes and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GIB = 2**30
VLLM_OVERHEAD_GIB = 1.5  # vLLM's own buffers and CUDA graphs beside weights and KV cache (an allowance)
CONTEXT_GIB = 1.5  # a process's CUDA context (~0.5-0.8 GiB) and NCCL buffers (an allowance)
CPU_RUNTIME_GIB = 0.55  # measured: a train-grpo process's RSS with its imports done, before the weights load
CPU_BACKWARD_COPIES = 6  # measured: a CPU backward's working set beyond `activations`, in fp32 hidden states a layer
ZERO3_MAX_LIVE_PARAMETERS = 1e9  # DeepSpeed's default stage3_max_live_parameters (bf16 when gathered)


@dataclass(frozen=True)
class ModelShape:
    params: int  # every parameter (vision tower included)
    vision_params: int
    hidden: int
    intermediate: int
    layers: int
    attention_layers: int  # layers with a KV cache (all, or a hybrid's full-attention ones)
    kv_heads: int
    head_dim: int
    vocab: int
    state_bytes_per_sequence: int = 0  # linear-attention layers' recurrent state (Gated DeltaNet), per sequence
    lora_params: int = 0  # the adapter's parameters at the run's rank and targets (0: full training)
    largest_layer_params: int = 0  # the biggest module's own parameters (the embedding, most often)

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.attention_layers * self.kv_heads * self.head_dim * 2  # K and V, bf16


@dataclass(frozen=True)
class Strategy:
    name: str  # one-gpu, ddp, zero1, zero2, zero3, fsdp
    world: int
    offload_optimizer: bool = False
    offload_params: bool = False

    @property
    def deepspeed(self) -> bool:
        return self.name.startswith("zero")

    def shard(self, what: str) -> int:
        """How many ways `what` (weights, grads, optimizer) is split over the processes."""
        stage = {"zero1": 1, "zero2": 2, "zero3": 3}.get(self.name, 0)
        if self.name == "fsdp":
            return self.world
        needed = {"optimizer": 1, "grads": 2, "weights": 3}[what]
        return self.world if stage >= needed else 1


@dataclass(frozen=True)
class Workload:
    micro_batch: int
    row_tokens: int  # the longest training row (max_seq_len: one row an episode, or a turn's prompt + reply)
    gradient_checkpointing: bool
    beta: float
    engine: str  # hf, vllm-colocate, vllm-server
    episodes_in_flight: int  # rollout_workers
    max_seq_len: int
    vllm_share: float  # vllm-colocate: share of each GPU
    gpu_gib: float
    on_gpu: bool = True


@dataclass
class Plan:
    parts: dict[str, float] = field(default_factory=dict)  # GiB per rank, by part
    notes: list[str] = field(default_factory=list)
    gpu_gib: float = 80.0
    on_gpu: bool = True

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        return self.total <= self.gpu_gib

    def lines(self) -> list[str]:
        shown = "  ".join(f"{name} {gib:.2f}" if gib < 1 else f"{name} {gib:.1f}" for name, gib in self.parts.items())
        verdict = "fits" if self.fits else "does NOT fit"
        where = "per GPU" if self.on_gpu else "of this machine's memory"
        return [shown, f"total {self.total:.1f} of {self.gpu_gib:.0f} GiB {where}: {verdict}", *self.notes]


def plan(shape: ModelShape, strategy: Strategy, work: Workload) -> Plan:
    """Memory per rank, in GiB, part by part."""
    out = Plan(gpu_gib=work.gpu_gib, on_gpu=work.on_gpu)
    dtype = 2.0 if work.on_gpu else 4.0  # activations and the rollouts' KV cache: bf16 on a GPU, fp32 on CPU
    full = shape.lora_params == 0
    trainable = shape.params if full else shape.lora_params
    if full and strategy.deepspeed:
        weights, grads, optimizer = 2.0 * shape.params, 2.0 * trainable, 12.0 * trainable
    elif full:
        weights, grads, optimizer = 4.0 * shape.params, 4.0 * trainable, 8.0 * trainable
    else:
        base = 2.0 if work.on_gpu else 4.0
        weights, grads, optimizer = base * shape.params + 4.0 * trainable, 4.0 * trainable, 8.0 * trainable
    out.parts["weights"] = weights / strategy.shard("weights") / GIB * (0 if strategy.offload_params else 1)
    out.parts["grads"] = grads / strategy.shard("grads") / GIB
    out.parts["optimizer"] = optimizer / strategy.shard("optimizer") / GIB * (0 if strategy.offload_optimizer else 1)
    if strategy.offload_params or strategy.offload_optimizer:
        out.notes.append("offloaded parts live in CPU memory (not counted per GPU)")
    if full and strategy.deepspeed and strategy.name in ("zero2", "zero3") and not strategy.offload_optimizer:
        states = zero_model_states(shape, strategy)
        counted = weights / strategy.shard("weights") + grads / strategy.shard("grads")
        counted += optimizer / strategy.shard("optimizer")
        live = 2.0 * min(ZERO3_MAX_LIVE_PARAMETERS, shape.params) if strategy.name == "zero3" else 0.0
        out.parts["zero buffers"] = (max(states - counted, 0.0) + live) / GIB
        out.notes.append(
            f"zero buffers: model states as DeepSpeed's estimator counts them ({states / GIB:.1f} GiB)"
            + (f" + up to {live / GIB:.1f} GiB of live gathered parameters" if live else "")
        )
    if work.on_gpu:
        out.parts["context"] = CONTEXT_GIB
    else:
        out.parts["runtime"] = CPU_RUNTIME_GIB
    reference = 2.0 * shape.params if full and work.beta > 0 else 0.0
    ref_shard = strategy.world if strategy.name in ("zero3", "fsdp") else 1
    out.parts["reference"] = reference / ref_shard / GIB
    if work.beta > 0 and not full:
        out.notes.append("reference: the policy with its LoRA disabled (no second copy)")
    tokens = work.micro_batch * work.row_tokens
    layer_io = tokens * shape.hidden * dtype  # one layer's input
    working = tokens * (10 * shape.hidden + 4 * shape.intermediate) * dtype  # one layer's forward, recomputed
    if work.gradient_checkpointing:
        activations = shape.layers * layer_io + working
    else:
        activations = shape.layers * (layer_io + working)
    out.parts["activations"] = activations / GIB
    if not work.on_gpu:  # calibrated on one measured run (the docstring): an allowance, not a derivation
        out.parts["backward"] = CPU_BACKWARD_COPIES * shape.layers * tokens * shape.hidden * dtype / GIB
    if work.engine == "hf":
        per_token = shape.kv_bytes_per_token * dtype / 2  # kv_bytes_per_token counts bf16
        kv = work.episodes_in_flight * (work.max_seq_len * per_token + shape.state_bytes_per_sequence)
        out.parts["kv cache"] = kv / GIB
        if strategy.name == "zero3":
            out.parts["gathered weights"] = 2.0 * shape.params / GIB  # ZeRO-3 gathers the whole model to generate
        out.notes.append(
            f"kv cache: {work.episodes_in_flight} episodes in flight at max_seq_len {work.max_seq_len:,} (worst case)"
        )
    elif work.engine == "vllm-colocate":
        share = work.vllm_share * work.gpu_gib
        out.parts["vllm"] = share
        kv_gib = share - 2.0 * shape.params / GIB - VLLM_OVERHEAD_GIB
        per_episode = work.max_seq_len * shape.kv_bytes_per_token + shape.state_bytes_per_sequence
        if kv_gib <= 0:
            out.notes.append(f"vllm: {share:.1f} GiB does not hold the bf16 weights: raise vllm_gpu_memory_utilization")
            out.parts["vllm"] = float("inf")
        else:
            episodes = kv_gib * GIB / max(per_episode, 1)
            out.notes.append(
                f"vllm: {share:.1f} GiB = bf16 weights {2.0 * shape.params / GIB:.1f} + KV cache {kv_gib:.1f} "
                f"({episodes:.1f} episodes at max_seq_len at once; more wait their turn)"
            )
    elif work.engine == "vllm-server":
        out.notes.append("vllm-server: the rollouts' weights and KV cache live on the server's own GPU")
    return out


def zero_model_states(shape: ModelShape, strategy: Strategy) -> float:
    """Bytes per GPU of a full bf16 run's model states, as DeepSpeed's estimators count them (no offload)."""
    if strategy.name == "zero3":
        return 18.0 * shape.params / strategy.world + 4.0 * shape.largest_layer_params
    return 4.0 * shape.params + 16.0 * shape.params / strategy.world


def strategy_from_accelerate(config: dict | None, world: int) -> Strategy:
    """The sharding an accelerate YAML asks for (`config` as read from the file; None: no YAML)."""
    if not config:
        return Strategy("one-gpu" if world == 1 else "ddp", world)
    kind = str(config.get("distributed_type", "NO")).upper()
    if kind == "DEEPSPEED":
        ds = config.get("deepspeed_config") or {}
        stage = int(ds.get("zero_stage", 2))
        return Strategy(
            f"zero{stage}" if stage else "ddp",
            world,
            offload_optimizer=str(ds.get("offload_optimizer_device", "none")) not in ("none", "None", ""),
            offload_params=str(ds.get("offload_param_device", "none")) not in ("none", "None", ""),
        )
    if kind == "FSDP":
        fsdp = config.get("fsdp_config") or {}
        return Strategy("fsdp", world, offload_params=bool(fsdp.get("fsdp_offload_params", False)))
    return Strategy("one-gpu" if world == 1 else "ddp", world)
