"""`train-grpo --check` and `sft-baseline --check`: everything a run resolves before it trains, printed,
with no weights loaded.

The model's config and tokenizer (or processor) are read from where `--model` points (a local
directory, or the Hugging Face cache: offline first, then the hub for those small files only), the
model is built on PyTorch's meta device to count its parameters (no memory, no weights), the
accelerate YAML gives the sharding, and the harness plays the first training task up to its first
prompt (train/budget.py) to measure it with the model's own tokenizer and chat template. The memory
plan is train/memory_plan.py's.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from tsbench.core.errors import UserError
from tsbench.train.memory_plan import ModelShape, Strategy, Workload, plan, strategy_from_accelerate


@dataclasses.dataclass
class Resolved:
    """What --model resolves to, without weights."""

    spec: str
    where: str  # the directory or hub id the config came from
    config: Any  # transformers PretrainedConfig
    tokenizer: Any
    processor: Any  # a VLM's processor, else None
    vision_language: bool
    warm_start: str | None  # the SFT adapter --model names, when it does


def require_hub(where: str) -> None:
    """One connection attempt to the hub before transformers tries it: offline, its client retries with
    back-off for about half a minute, printing each retry, before the error that says nothing new."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=HUB_PROBE_S).close()
    except OSError:
        raise UserError(
            f"{where} is not in the Hugging Face cache and {constants.ENDPOINT} cannot be reached: pass a local "
            f"folder as --model, or fill the cache first (hf download {where} --include '*.json' 'tokenizer*')"
        ) from None


HUB_PROBE_S = 5.0


def resolve_source(spec: str) -> Resolved:
    """The model's config, tokenizer and (a VLM's) processor; a UserError when they cannot be read."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    from tsbench.train.policy import load_processor, load_tokenizer, resolve

    source = resolve(spec)
    try:
        config = AutoConfig.from_pretrained(_snapshot(source.weights, source.local))
    except (OSError, ValueError) as exc:
        raise UserError(f"--check: cannot read {source.weights}'s config.json ({str(exc).splitlines()[0]})") from None
    vision = config.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    try:
        if vision:
            processor = load_processor(_snapshot(source.weights, source.local), True)
            tokenizer = processor.tokenizer
        else:
            processor = None
            tokenizer_dir = (
                source.adapter
                if source.adapter and (Path(source.adapter) / "tokenizer_config.json").is_file()
                else source.weights
            )
            tokenizer = load_tokenizer(_snapshot(tokenizer_dir, source.local), True)
    except (OSError, ValueError, TypeError) as exc:
        raise UserError(f"--check: cannot read {source.weights}'s tokenizer ({str(exc).splitlines()[0]})") from None
    return Resolved(spec, source.weights, config, tokenizer, processor, vision, source.adapter)


def _snapshot(where: str, local: bool) -> str:
    """A hub id's cached snapshot directory (fetching its small files when allowed), or the directory itself."""
    if local:
        return where
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.jinja", "*.txt", "*.model", "tokenizer*"]
    try:
        return snapshot_download(where, allow_patterns=patterns, local_files_only=True)
    except Exception:  # not cached: fetch the config and tokenizer files only (never the weights)
        if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
            raise OSError(f"{where} is not in the Hugging Face cache (offline)") from None
        require_hub(where)
        return snapshot_download(where, allow_patterns=patterns)


def model_shape(resolved: Resolved, lora: int, lora_target: Any) -> ModelShape:
    """Parameter counts of the model built on the meta device; attention and state sizes from its config."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    cls = AutoModelForImageTextToText if resolved.vision_language else AutoModelForCausalLM
    with torch.device("meta"):
        model = cls.from_config(resolved.config)
    params = sum(p.numel() for p in model.parameters())
    largest = max((sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules()), default=0)
    vision = sum(
        p.numel() for n, p in model.named_parameters() if ".visual." in f".{n}" or "vision" in n.split(".")[1:2]
    )
    targets = None if lora_target == "all-linear" else set(lora_target)
    adapter = 0
    if lora:
        for name, module in model.named_modules():
            leaf = name.rsplit(".", 1)[-1]
            if isinstance(module, torch.nn.Linear) and leaf != "lm_head" and (targets is None or leaf in targets):
                adapter += lora * (module.in_features + module.out_features)
    text = resolved.config.get_text_config()
    layers = int(text.num_hidden_layers)
    kinds = list(getattr(text, "layer_types", None) or [])
    attention = sum(1 for k in kinds if "linear" not in str(k)) if kinds else layers
    heads = int(text.num_attention_heads)
    head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
    linear = layers - attention
    state = 0
    if linear and getattr(text, "linear_num_value_heads", None):
        state = linear * text.linear_num_value_heads * text.linear_key_head_dim * text.linear_value_head_dim * 4
    return ModelShape(
        params=params,
        vision_params=vision,
        hidden=int(text.hidden_size),
        intermediate=int(getattr(text, "intermediate_size", 4 * text.hidden_size)),
        layers=layers,
        attention_layers=attention,
        kv_heads=int(getattr(text, "num_key_value_heads", heads) or heads),
        head_dim=head_dim,
        vocab=int(text.vocab_size),
        state_bytes_per_sequence=state,
        lora_params=adapter,
        largest_layer_params=largest,
    )


def launch_strategy(launch: Any) -> tuple[Strategy, str]:
    """The sharding the run's accelerate YAML asks for, and how to say it."""
    config = None
    if launch.accelerate_config:
        import yaml

        path = Path(launch.accelerate_config)
        if not path.is_file():
            raise UserError(f"no such accelerate config: {path}")
        config = yaml.safe_load(path.read_text()) or {}
    strategy = strategy_from_accelerate(config, launch.num_processes)
    machines = f"{launch.num_machines} machine{'s' if launch.num_machines > 1 else ''}"
    described = f"{launch.num_processes} process(es) on {machines}, {strategy.name}"
    return strategy, described + (f" ({launch.accelerate_config})" if launch.accelerate_config else "")


def _count(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.1f} M"


def model_lines(resolved: Resolved, shape: ModelShape, lora: int) -> list[str]:
    kind = "vision-language (image-text-to-text)" if resolved.vision_language else "text"
    trains = f"a LoRA of rank {lora} ({_count(shape.lora_params)})" if lora else "every parameter"
    tok = resolved.tokenizer
    template = "its chat template" if getattr(tok, "chat_template", None) else "NO chat template"
    lines = [
        f"model      {resolved.spec} -> {resolved.where}: {resolved.config.model_type}, {kind}, "
        f"{_count(shape.params)} parameters"
        + (f" (vision {_count(shape.vision_params)})" if shape.vision_params else "")
        + f"; trains {trains}",
        f"           {shape.layers} layers ({shape.attention_layers} with a KV cache), hidden {shape.hidden}, "
        f"{shape.kv_heads} KV heads x {shape.head_dim}, vocab {shape.vocab:,}",
        f"tokenizer  {len(tok):,} ids (the config's vocab: {shape.vocab:,}), {template}",
    ]
    if resolved.warm_start:
        lines.append(f"warm start {resolved.warm_start} (an SFT adapter, folded into its base before training)")
    return lines


def check_grpo(cfg: Any, where: str | None = None) -> str:
    """The --check report of a GRPOConfig (validated for its world size); a UserError for what cannot start."""
    from tsbench.harness import get_harness
    from tsbench.train.budget import check_context
    from tsbench.train.grpo import check_images
    from tsbench.train.launch import device_problems

    resolved = resolve_source(cfg.policy.model)
    check_images(cfg, resolved.vision_language)
    shape = model_shape(resolved, cfg.policy.lora, cfg.policy.targets())
    strategy, launch_text = launch_strategy(cfg.launch)
    history = check_context(cfg, resolved.tokenizer, processor=resolved.processor)
    from tsbench.train.budget import first_prompt_tokens

    prompt = first_prompt_tokens(cfg, resolved.tokenizer, resolved.processor)
    hc = cfg.harness_config
    rows = hc.max_turns if history == "as-rendered" else 1
    world = cfg.launch.num_processes
    from tsbench.tasks import get_taskset
    from tsbench.train import rewards as rw

    weights = rw.reward_functions(cfg.rewards, get_taskset(cfg.tasks.family))[1]
    on_gpu = cfg.launch.plan_for == "gpu"
    derived = cfg.trl_values(world=world, rows=rows, on_gpu=on_gpu, reward_weights=weights)
    per_rank = cfg.batch_size // world
    harness = get_harness(cfg.harness)
    kernel = harness.kernel
    row_tokens = cfg.max_seq_len if kernel else min(cfg.max_seq_len, prompt + (hc.max_tokens or cfg.max_seq_len))
    engine = cfg.rollout.engine
    work = Workload(
        micro_batch=cfg.micro_batch_size,
        row_tokens=row_tokens,
        gradient_checkpointing=cfg.gradient_checkpointing,
        beta=cfg.beta,
        engine=engine,
        episodes_in_flight=min(cfg.rollout.rollout_workers, per_rank),
        max_seq_len=cfg.max_seq_len,
        vllm_share=cfg.vllm_gpu_memory_utilization,
        gpu_gib=cfg.launch.gpu_memory_gib if on_gpu else machine_memory_gib(),
        on_gpu=on_gpu,
    )
    memory = plan(shape, strategy, work)
    per_machine = world // max(cfg.launch.num_machines, 1)
    devices = device_problems(
        cfg, processes=world, gpus_visible=1 if world > 1 else per_machine, gpus_on_machine=per_machine
    )
    shown = resolved.vision_language and bool(harness.images)  # check_images refused images in observations
    images = "the plots beside the token ids (TRL's vision-language vLLM path)" if shown else "token ids only"
    engines = {
        "hf": "hf: the training model generates (transformers generate)",
        "vllm-colocate": f"vllm-colocate: TRL's vLLM in every training process, {cfg.vllm_gpu_memory_utilization:g} of its GPU; {images}",
        "vllm-server": f"vllm-server: `trl vllm-serve` at {cfg.vllm_server_base_url}; {images}",
    }
    lines = [f"train-grpo --check{f': {where}' if where else ''}"]
    lines += model_lines(resolved, shape, cfg.policy.lora)
    lines += [
        f"engine     {engines[engine]}",
        f"harness    {cfg.harness}: {hc.max_turns} turn(s) x {hc.max_tokens} tokens, max_seq_len {cfg.max_seq_len:,}; "
        f"first prompt {prompt:,} tokens" + (" (the question alone: the series stays in the kernel)" if kernel else ""),
        f"           {harness_declares(harness, cfg.episode_setup()[1])}",
        f"history    {history}: {rows} training row(s) per episode (reasoning_history {cfg.rollout.reasoning_history})",
        f"reward     {cfg.rewards.reward}, weights {', '.join(f'{w:g}' for w in weights)}; loss {cfg.loss_type}, "
        f"scale_rewards {cfg.reward_scaling}, beta {cfg.beta:g}",
        f"launch     {launch_text}",
        f"batch      {cfg.batch_size} rollouts = {cfg.tasks_per_step} tasks x G {cfg.group_size}; per process "
        f"{per_rank} episodes -> {per_rank * rows} rows, micro-batch {cfg.micro_batch_size}, accumulation "
        f"{derived['gradient_accumulation_steps']}, TRL num_generations {derived['num_generations']}",
        f"tokens     per process per step: {per_rank * rows} rows; TRL pads them to the step's longest (up to "
        f"{per_rank * rows:,} x {row_tokens:,} = {per_rank * rows * row_tokens:,} cells); each forward runs at its "
        "own rows' length instead (train/trainer.py)",
        f"memory per rank (GiB; {cfg.launch.gpu_memory_gib:g} GiB GPUs):"
        if on_gpu
        else f"memory per process (GiB of peak RSS on CPU, fp32; this machine: {work.gpu_gib:.0f} GiB):",
        *(f"           {line}" for line in memory.lines()),
        "devices    " + ("; ".join(devices) if devices else "ok"),
        timeout_line(cfg, world),
        "trl        " + trl_validation(cfg, world=world, rows=rows, reward_weights=weights),
        *kernel_lines(resolved.config),
    ]
    scaling = cfg.scaling_problems(rows) + cfg.timeout_problems(world)
    lines += [f"refused    {problem}" for problem in scaling]
    if not memory.fits:
        lines.append(
            "refused   the plan does not fit: shard more (ZeRO-3 / FSDP), lower micro_batch_size or max_seq_len"
        )
    return "\n".join(lines)


def machine_memory_gib() -> float:
    """This machine's physical memory, for a CPU run's plan."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def timeout_line(cfg: Any, world: int) -> str:
    """The episode wall clock against the process group's timeout, in numbers."""
    bound = cfg.rollout_bound_s(world)
    head = f"timeouts   ddp_timeout {cfg.ddp_timeout:,} s (the process group's, set before anything creates it)"
    if bound is None:
        return head + (
            "; no episode wall clock: one process's rollouts are unbounded"
            + (", and the others would be aborted waiting for them (set episode_wall_s)" if world > 1 else "")
        )
    spare = cfg.ddp_timeout - bound
    return (
        f"{head}; a step's rollouts end within {bound:,.0f} s on each process (episode_wall_s "
        f"{cfg.harness_config.episode_wall_s:g} s x waves x {1 + cfg.refill_rounds} round(s)): "
        + (f"{spare:,.0f} s to spare" if spare >= 0 else f"{-spare:,.0f} s too long")
    )


def trl_validation(cfg: Any, *, world: int, rows: int, reward_weights: list[float]) -> str:
    """TRL's own checks (GRPOConfig.__post_init__) on the config the trainer would get (bf16 off: TRL refuses
    it where no GPU is visible, and --check runs anywhere)."""
    try:
        cfg.for_launch(world=world, rows=rows, on_gpu=False, reward_weights=reward_weights)
    except UserError as error:
        return f"REFUSED: {error}"
    return "GRPOConfig.__post_init__ accepts the config the trainer gets (batch arithmetic, loss, vLLM, sampling)"


# model types whose linear-attention layers fall back to a slow torch loop without these packages
FAST_KERNELS = {
    ("qwen3_5", "qwen3_next", "qwen3_5_moe"): (
        ("fla", "flash-linear-attention", "pip install 'tsbench[gpu]'"),
        ("causal_conv1d", "causal-conv1d", "pip install 'tsbench[kernels]' (compiles against your CUDA torch)"),
    ),
}


def kernel_lines(config: Any) -> list[str]:
    """A warning per fast kernel the model's layers need and this environment lacks (no error: it runs, slowly)."""
    import importlib.util

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for types, packages in FAST_KERNELS.items():
        if config.model_type in types or getattr(text, "model_type", None) in types:
            missing = [(name, how) for module, name, how in packages if importlib.util.find_spec(module) is None]
            return [
                f"warning    {name} is not installed: {config.model_type}'s linear-attention layers fall back to "
                f"transformers' torch loop (much slower at long context): {how}"
                for name, how in missing
            ]
    return []


def harness_declares(harness: Any, settings: Any) -> str:
    """What the harness declares (its capabilities; where its kernels run) and its own section's settings
    as its episodes get them: a plugin harness's show here as a built-in's do."""
    from tsbench.harness.settings import SHARED, section_name

    declared = []
    for name, value in harness.capabilities().items():
        if name == "kernel" and value:
            declared.append("kernel (UNSAFE: no jail)" if settings.unsafe_sandbox else "kernel (in the jail)")
        elif value:
            declared.append(name if value is True else f"{name} {value}")
    own = [f"{f.name}={getattr(settings, f.name)!r}" for f in dataclasses.fields(settings) if f.name not in SHARED]
    section = f"[{section_name(harness)}] {', '.join(own)}" if own else "no settings of its own"
    return f"declares {', '.join(declared) or 'nothing'}; {section}"


def check_sft(cfg: Any, where: str | None = None) -> str:
    """The --check report of an SFTConfig: model, tokenizer, data, and the memory plan of one GPU."""
    from tsbench.train.sft_config import is_series_model

    if is_series_model(cfg.policy.model):
        raise UserError(
            f"--check reads a Hugging Face policy's files; {cfg.policy.model} is built by the TSLM loader "
            "(models/tslm/): run without --check"
        )
    resolved = resolve_source(cfg.policy.model)
    shape = model_shape(resolved, cfg.policy.lora, cfg.policy.targets())
    context = getattr(resolved.config.get_text_config(), "max_position_embeddings", None)
    max_seq_len = cfg.max_seq_len or context or 4096
    if context is not None and max_seq_len > context:
        raise UserError(f"--max-seq-len {max_seq_len} exceeds the {context}-token context of {cfg.policy.model}")
    work = Workload(
        micro_batch=cfg.batch_size,
        row_tokens=max_seq_len,
        gradient_checkpointing=cfg.gradient_checkpointing,
        beta=0.0,
        engine="none",
        episodes_in_flight=0,
        max_seq_len=max_seq_len,
        vllm_share=0.0,
        gpu_gib=80.0,
    )
    memory = plan(shape, Strategy("one-gpu", 1), work)
    missing = [d for d in cfg.data if not Path(d).exists()]
    data = ", ".join(cfg.data) or "the family's default"
    lines = [f"sft-baseline --check{f': {where}' if where else ''}"]
    lines += model_lines(resolved, shape, cfg.policy.lora)
    lines += [
        f"format     {cfg.format} of family {cfg.family}; data {data}"
        + (f" (not here yet: {', '.join(missing)}; see the config's header for how it is made)" if missing else ""),
        f"examples   up to {max_seq_len:,} tokens, batch {cfg.batch_size}, {cfg.epochs} epochs, lr {cfg.lr:g}",
        "memory on one GPU (GiB, 80 GiB GPUs):",
        *(f"           {line}" for line in memory.lines()),
    ]
    return "\n".join(lines)
