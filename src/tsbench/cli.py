"""The `tsbench` command: one thin function per subcommand over the library.

Bad input ends with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from tsbench.errors import UserError

app = typer.Typer(
    help="Long-context time-series benchmarks for language-model agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
console = Console()
err_console = Console(stderr=True)


def _split_list(values: Optional[list[str]]) -> Optional[list[str]]:
    """Accept `--x a,b` and `--x a --x b` alike."""
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _ints(values: Optional[list[str]], flag: str) -> Optional[list[int]]:
    items = _split_list(values)
    if items is None:
        return None
    try:
        return [int(v) for v in items]
    except ValueError:
        raise UserError(f"{flag} takes integers (got {' '.join(items)})") from None


def _floats(values: Optional[list[str]], flag: str) -> Optional[list[float]]:
    items = _split_list(values)
    if items is None:
        return None
    try:
        return [float(v) for v in items]
    except ValueError:
        raise UserError(f"{flag} takes numbers (got {' '.join(items)})") from None


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} rows"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    )


@app.command()
def generate(
    seed: int = typer.Option(42, help="Run seed; the same seed and arguments give identical file bytes."),
    split: str = typer.Option("test", help="test, val, train or all."),
    preset: str = typer.Option("paper", help="paper (the published grid) or small (short rows for demos and tests)."),
    rows_per_cell: Optional[int] = typer.Option(None, help="Test rows per (category, L) cell [paper: 50]."),
    train_rows: Optional[int] = typer.Option(None, help="Train rows, spread evenly over the cells [paper: 5000]."),
    val_rows: Optional[int] = typer.Option(None, help="Validation rows, spread evenly over the cells [paper: 500]."),
    lengths: Optional[list[str]] = typer.Option(None, help="Series lengths for every category, e.g. 16384,32768."),
    categories: Optional[list[str]] = typer.Option(None, help="Precise categories to generate (comma-separated)."),
    p_present: Optional[float] = typer.Option(None, help="Localize: probability that an anomaly is present [0.8]."),
    min_k: Optional[int] = typer.Option(None, help="All-channels: smallest number of anomalous channels [0]."),
    width_range: Optional[tuple[int, int]] = typer.Option(None, help="Window width bounds in samples [8 256]."),
    magnitude_range: Optional[tuple[float, float]] = typer.Option(None, help="Magnitude bounds in sigma [2 6]."),
    noise_weights: Optional[list[str]] = typer.Option(None, help="Weights of white, red, ar1 base noise [1,1,1]."),
    out: Path = typer.Option(Path("data/anomalyxl"), help="Output root; files go to <out>/seed<seed>/."),
) -> None:
    """Generate AnomalyXL splits (precise + MCQ projection) as parquet, with a manifest."""
    from tsbench.anomalyxl import config as gen_config
    from tsbench.anomalyxl.generate import generate_split, total_rows, update_manifest
    from tsbench.anomalyxl.validate import check_config

    splits = list(gen_config.SPLITS) if split == "all" else [split]
    if any(s not in gen_config.SPLITS for s in splits):
        raise UserError(f"--split must be test, val, train or all (got {split})")
    cfg = gen_config.preset(
        preset, seed=seed, rows_per_cell=rows_per_cell, train_rows=train_rows, val_rows=val_rows,
        p_present=p_present, min_k=min_k,
        width_range=tuple(width_range) if width_range else None,
        magnitude_range=tuple(magnitude_range) if magnitude_range else None,
    )
    if (lens := _ints(lengths, "--lengths")) is not None:
        cfg.single_lengths = cfg.multi_lengths = tuple(sorted(set(lens)))
    if (cats := _split_list(categories)) is not None:
        cfg.categories = tuple(cats)
    if (weights := _floats(noise_weights, "--noise-weights")) is not None:
        cfg.noise_weights = tuple(weights)
    check_config(cfg)

    entries = {}
    with _progress() as progress:
        for name in splits:
            task = progress.add_task(name, total=total_rows(cfg, name), rate="")
            started, written = time.perf_counter(), [0, 0]

            def advance(rows: int, values: int, task=task, started=started, written=written) -> None:
                written[0] += rows
                written[1] += values
                dt = max(time.perf_counter() - started, 1e-9)
                progress.update(task, advance=rows, rate=f"{written[0] / dt:.1f} rows/s {written[1] * 4 / dt / 2**20:.0f} MB/s")

            entries[name] = generate_split(cfg, name, out, progress=advance)
    manifest = update_manifest(cfg, out, entries)
    table = Table("file", "rows", "MB", "sha256", title=f"AnomalyXL seed {seed} ({cfg.preset})")
    for entry in entries.values():
        for fname, info in entry["files"].items():
            table.add_row(fname, str(info["rows"]), f"{info['bytes'] / 2**20:.1f}", info["sha256"][:16])
    console.print(table)
    console.print(f"manifest: {manifest}")


@app.command()
def describe(
    data: Path = typer.Argument(..., help="A generated parquet file."),
    plot: Optional[str] = typer.Option(None, help="Draw this row id (full series, gold window shaded, zoom inset)."),
    out: Optional[Path] = typer.Option(None, help="PNG path for --plot [<row id>.png]."),
) -> None:
    """Print what a generated file holds, or draw one row."""
    from tsbench.anomalyxl.describe import composition
    from tsbench.anomalyxl.rows import iter_rows, read_index

    _require_file(data)
    if plot is not None:
        from tsbench.anomalyxl.figure import plot_row

        row = next(iter_rows(data, ids={plot}), None)
        if row is None:
            raise UserError(f"no row with id {plot!r} in {data}")
        console.print(f"wrote {plot_row(row, out or Path(f'{plot}.png'))}")
        return
    comp = composition(read_index(data))
    cells = comp["cells"]
    table = Table("category", *[str(c) for c in cells.columns], "total", title=f"{data.name}: {comp['rows']} rows (category x L)")
    for category, counts in cells.iterrows():
        table.add_row(category, *[str(v) for v in counts], str(int(counts.sum())))
    console.print(table)
    details = Table("category", "composition", title="composition")
    for category, info in comp["categories"].items():
        parts = [f"{k}: {v}" for k, v in info.items() if k != "rows"]
        details.add_row(category, "\n".join(parts))
    console.print(details)


@app.command()
def score(
    data: Path = typer.Option(..., help="A generated parquet file (precise or coarse)."),
    responses: Path = typer.Option(..., help="JSONL with one {\"id\": ..., \"response\": ...} per line."),
    out: Optional[Path] = typer.Option(None, help="Write per-row scores and metrics to this parquet file."),
) -> None:
    """Score your own predictions against a generated file and print per-category means."""
    import pandas as pd

    from tsbench.anomalyxl.rows import read_index
    from tsbench.scoring import metrics
    from tsbench.scoring.aggregate import macro_f1

    _require_file(data)
    _require_file(responses)
    given = {}
    for n, line in enumerate(responses.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            given[str(rec["id"])] = str(rec["response"])
        except (json.JSONDecodeError, KeyError, TypeError):
            raise UserError(f"{responses}:{n}: each line must be a JSON object with 'id' and 'response'") from None
    index = read_index(data)
    rows = []
    for rec in index.itertuples():
        gold = json.loads(rec.gold)
        response = given.get(rec.id)
        m = metrics(rec.category, gold, response if response is not None else "")
        rows.append({
            "id": rec.id, "category": rec.category, "length": rec.length, "answered": response is not None,
            "score": m["score"], "valid": m["valid"], "gold_answer": gold.get("answer"),
            "parsed_answer": m["parsed"] if isinstance(m["parsed"], str) else None,
            "metrics": json.dumps(m, default=str),
        })
    df = pd.DataFrame(rows)
    unknown = set(given) - set(index["id"])
    if unknown:
        err_console.print(f"warning: {len(unknown)} response ids are not in {data.name} (ignored)")
    table = Table("category", "rows", "answered", "mean score", "macro-F1", title=f"scores: {data.name}")
    for category, group in df.groupby("category", sort=False):
        f1 = ""
        if group["gold_answer"].notna().all():
            options = sorted({o for opts in index.loc[index.category == category, "options"] for o in opts})
            f1 = f"{macro_f1(list(group['gold_answer']), [p or '' for p in group['parsed_answer']], options):.3f}"
        table.add_row(category, str(len(group)), str(int(group["answered"].sum())), f"{group['score'].mean():.3f}", f1)
    console.print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_parquet(out, index=False)
        console.print(f"wrote {out}")


@app.command("eval")
def eval_cmd(
    model: Optional[str] = typer.Option(None, help="provider/name: gpt-4.1-mini, openai/..., vllm/<hf-id>, local/smollm2-135m, scripted/zscore, classical/<dir>, detector/default."),
    harness: Optional[str] = typer.Option(None, help="single-pass-text, single-pass-image, rlm, rlm-image, tools or tools-image [rlm]."),
    config: Optional[Path] = typer.Option(None, help="A TOML file from experiments/ with these same settings; flags override it."),
    data: Optional[list[Path]] = typer.Option(None, help="Dataset parquet file(s) or a seed dir; default data/anomalyxl/seed<seed>/<split>-*.parquet."),
    seed: Optional[int] = typer.Option(None, help="Dataset seed [42]."),
    split: Optional[str] = typer.Option(None, help="Dataset split [test]."),
    regime: Optional[str] = typer.Option(None, help="precise, coarse or both [both]."),
    categories: Optional[list[str]] = typer.Option(None, help="Only these categories (comma-separated)."),
    lengths: Optional[list[str]] = typer.Option(None, help="Only these series lengths (comma-separated)."),
    limit: Optional[int] = typer.Option(None, help="At most N rows per category."),
    epochs: Optional[int] = typer.Option(None, help="Episodes per row [1]."),
    concurrency: Optional[int] = typer.Option(None, help="Episodes in parallel [4]."),
    max_turns: Optional[int] = typer.Option(None, help="Model replies per RLM episode [15]."),
    depth: Optional[int] = typer.Option(None, help="sub_rlm recursion depth [0]."),
    max_tokens: Optional[int] = typer.Option(None, help="Max tokens per model reply."),
    temperature: Optional[float] = typer.Option(None, help="Sampling temperature (provider default if unset)."),
    cell_timeout: Optional[float] = typer.Option(None, help="Seconds per code cell before interrupt/restart [300]."),
    memory_gib: Optional[float] = typer.Option(None, help="Kernel memory cap in GiB [4]."),
    text_budget_chars: Optional[int] = typer.Option(None, help="single-pass-text: characters of serialized values [200000]."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible server URL (or OPENAI_BASE_URL)."),
    tools: Optional[Path] = typer.Option(None, help="Evolved tools dir (tsbench evolve --out) for --harness tools."),
    tool_protocol: Optional[str] = typer.Option(None, help="Tool calls: native (OpenAI tools), json (text protocol) or auto."),
    memory: Optional[Path] = typer.Option(None, help="Episodic memory bank (tsbench memory build) prefixed to prompts."),
    top_k: Optional[int] = typer.Option(None, help="Precedents retrieved from --memory [3]."),
    out: Optional[Path] = typer.Option(None, help="Run dir [results/<model>__<harness>]."),
    overwrite: bool = typer.Option(False, help="Discard an existing run with different settings."),
) -> None:
    """Evaluate a model under a harness; re-running the same command resumes."""
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import RunProgress, run_eval
    from tsbench.eval.schema import load_samples
    from tsbench.eval.summary import summarize

    settings = _load_config(config) if config else {}
    flags = {
        "model": model, "harness": harness, "data": [str(d) for d in data] if data else None, "seed": seed,
        "split": split, "regime": regime, "categories": _split_list(categories), "lengths": _ints(lengths, "--lengths"),
        "limit": limit, "epochs": epochs, "concurrency": concurrency, "max_turns": max_turns, "depth": depth,
        "max_tokens": max_tokens, "temperature": temperature, "cell_timeout_s": cell_timeout, "memory_gib": memory_gib,
        "text_budget_chars": text_budget_chars, "tools_dir": str(tools) if tools else None,
        "tool_protocol": tool_protocol, "memory_bank": str(memory) if memory else None, "top_k": top_k,
        "base_url": base_url, "out": str(out) if out else None,
    }
    settings.update({k: v for k, v in flags.items() if v is not None})
    settings["overwrite"] = overwrite
    settings.setdefault("text_budget_chars", _trained_text_budget(settings.get("model", "")))
    if settings["text_budget_chars"] is None:
        del settings["text_budget_chars"]
    for given in (tools, memory):
        if given is not None and not given.exists():
            raise UserError(f"no such file or directory: {given}")
    if not settings.get("model"):
        raise UserError("--model is required (or a --config that sets model)")
    try:
        cfg = EvalConfig(**settings)
    except TypeError as exc:
        raise UserError(f"bad setting in {config}: {exc}") from None
    from tsbench.harness import HARNESSES

    if cfg.harness not in HARNESSES:
        raise UserError(f"--harness must be one of {', '.join(HARNESSES)} (got {cfg.harness})")

    progress_bar = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TimeRemainingColumn(), console=err_console,
    )
    bar = progress_bar.add_task(f"{cfg.model} / {cfg.harness}", total=None, info="")
    state = RunProgress()

    def on_update(p: RunProgress) -> None:
        if not progress_bar.live.is_started:  # shown from the first finished row, after the checks passed
            progress_bar.start()
        means = " ".join(f"{_short(c)}={m:.2f}" for c, m in sorted(p.means().items()))
        info = f"err={p.errors} tok={p.input_tokens + p.output_tokens:,} {means}"
        progress_bar.update(bar, total=p.total, completed=p.done, info=info)

    try:
        run_dir = run_eval(cfg, _model_factory, progress=state, on_update=on_update)
    except KeyboardInterrupt:
        progress_bar.stop()
        err_console.print("interrupted: finished rows are saved; run the same command to resume", markup=False)
        sys.exit(130)
    progress_bar.stop()
    _print_summary(summarize(load_samples(run_dir)), f"{cfg.model} / {cfg.harness}: {run_dir}")


def _trained_text_budget(model: str) -> Optional[int]:
    """A model trained by sft-baseline records the prompt budget it learned with; eval reuses it."""
    if not model.startswith("local/"):
        return None
    manifest = Path(model.split("/", 1)[1]) / "run.json"
    if not manifest.is_file():
        return None
    try:
        return json.loads(manifest.read_text()).get("eval_hint", {}).get("text_budget_chars")
    except (json.JSONDecodeError, AttributeError):
        return None


def _short(category: str) -> str:
    return {"localize": "loc", "classify_with_evidence": "c+e", "measure_magnitude": "mmag",
            "localize_all_channels": "lac", "lead_lag_with_magnitude": "ll", "presence": "pres",
            "start_time": "st", "categorization": "cat", "magnitude_band": "mag", "identification": "id",
            "indicator": "ind"}.get(category, category)


def _model_factory(cfg):
    from tsbench.models.registry import get_model, split_spec

    provider, _ = split_spec(cfg.model)
    opts = {}
    if provider in ("openai", "vllm") and cfg.base_url:
        opts["base_url"] = cfg.base_url
    if provider == "local" and cfg.max_tokens:
        opts["max_new_tokens"] = cfg.max_tokens
    try:
        return get_model(cfg.model, **opts)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _load_config(path: Path) -> dict:
    import tomllib

    _require_file(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    return dict(data.get("eval", data))


def _print_summary(summary, title: str) -> None:
    table = Table("category", "rows", "mean score", "valid", "errors", "turns", "forced", "tokens in", "tokens out", title=title)
    for rec in summary.to_dict("records"):
        table.add_row(
            rec["category"], str(rec["rows"]), f"{rec['mean_score']:.3f}", f"{rec['valid_rate']:.2f}", str(rec["errors"]),
            f"{rec['mean_turns']:.1f}", f"{rec['forced_final']:.2f}", f"{rec['tokens_in']:,}", f"{rec['tokens_out']:,}",
        )
    console.print(table)


@app.command()
def show(
    run: Path = typer.Argument(..., help="A run dir under results/."),
    id: Optional[str] = typer.Option(None, "--id", help="Show this sample's transcript."),
    epoch: int = typer.Option(0, help="Which epoch of --id."),
) -> None:
    """List a run's rows, or print one episode's transcript (messages, code, observations, answer, gold, score)."""
    from tsbench.eval.schema import load_samples

    if not (run / "run.json").is_file():
        raise UserError(f"{run} is not a run dir (no run.json)")
    samples = load_samples(run)
    if id is None:
        table = Table("id", "epoch", "score", "turns", "error", title=str(run))
        for rec in samples.to_dict("records"):
            failed = isinstance(rec["error_type"], str)
            table.add_row(rec["id"], str(rec["epoch"]), "-" if failed else f"{rec['score']:.3f}", str(rec["turns"]), rec["error_type"] if failed else "")
        console.print(table)
        return
    match = samples[(samples["id"] == id) & (samples["epoch"] == epoch)]
    if match.empty:
        raise UserError(f"no sample {id!r} (epoch {epoch}) in {run}")
    rec = match.iloc[0].to_dict()
    from rich.panel import Panel
    from rich.syntax import Syntax

    for event in json.loads(rec["transcript"]):
        role = event.get("role")
        if role == "tool":
            for cell in event.get("cells", []):
                console.print(Panel(Syntax(cell["code"], "python", word_wrap=True), title=f"code (turn {event['turn']})", border_style="cyan"))
            console.print(Panel(event["observation"], title="observation" + (f" + {len(event['images'])} image(s)" if event.get("images") else ""), border_style="yellow"))
        elif role == "assistant":
            console.print(Panel(event["content"], title=f"assistant (turn {event.get('turn', 1)}, {event.get('output_tokens', 0)} tokens out)", border_style="green"))
        elif role == "sub_rlm":
            console.print(Panel(f"Q: {event['question']}\nA: {event['final']}", title="sub_rlm call", border_style="magenta"))
        else:
            console.print(Panel(str(event.get("content", "")), title=role or "event", border_style="white"))
    failed = isinstance(rec["error_type"], str)
    score_text = f"error ({rec['error_type']}): {rec['error']}" if failed else f"{rec['score']:.3f}"
    parsed = rec["parsed_answer"] if isinstance(rec["parsed_answer"], str) else "(nothing parseable)"
    console.print(Panel(f"parsed: {parsed}\ngold:   {rec['gold']}\nscore:  {score_text}", title="result", border_style="bold"))


@app.command()
def leaderboard(
    runs: Optional[list[Path]] = typer.Argument(None, help="Run dirs (or folders holding them) [results]."),
    out: Path = typer.Option(Path("results/leaderboard"), help="Where leaderboard.{md,html,csv} and figures go."),
    with_paper: bool = typer.Option(False, help="Also show the paper's published Table 1 rows (quoted)."),
    n_boot: int = typer.Option(1000, help="Bootstrap resamples for the 95% intervals."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
) -> None:
    """Table 1 layout, per-length figures, bootstrap intervals, costs and failures from any set of runs."""
    from tsbench.leaderboard import build_leaderboard, rich_table

    try:
        result = build_leaderboard(runs or [Path("results")], out, with_paper=with_paper, n_boot=n_boot, seed=seed)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    for warning in result.warnings:
        err_console.print(f"warning: {warning}", markup=False)
    console.print(rich_table(result))
    console.print(f"wrote {out}/leaderboard.md, leaderboard.html, leaderboard.csv")


@app.command("sft-baseline")
def sft_baseline(
    model: str = typer.Option(..., help="classical (features + XGBoost heads), or an LM: local/smollm2-135m, local/<dir>, a path or an HF id."),
    format: Optional[str] = typer.Option(None, "--format", help="LMs: single-pass-text or rlm-trajectories [single-pass-text]."),
    config: Optional[Path] = typer.Option(None, help="A TOML file from experiments/sft/ ([sft] table); flags override it."),
    data: Optional[list[Path]] = typer.Option(None, help="single-pass-text/classical: dataset seed dir; rlm-trajectories: results/<run> dir(s)."),
    seed: int = typer.Option(42, help="Dataset seed when --data is not given (data/anomalyxl/seed<seed>)."),
    regime: Optional[str] = typer.Option(None, help="precise or coarse (rlm-trajectories also: both)."),
    lora_r: Optional[int] = typer.Option(None, help="LoRA rank [16]."),
    lora_alpha: Optional[int] = typer.Option(None, help="LoRA alpha [32]."),
    lora_dropout: Optional[float] = typer.Option(None, help="LoRA dropout [0.05]."),
    target: Optional[str] = typer.Option(None, help="LoRA target modules [q_proj,v_proj]."),
    full: bool = typer.Option(False, help="Full fine-tuning instead of LoRA."),
    epochs: Optional[int] = typer.Option(None, help="Epochs [5]."),
    lr: Optional[float] = typer.Option(None, help="Learning rate [1e-4]."),
    weight_decay: Optional[float] = typer.Option(None, help="AdamW weight decay [0.01]."),
    grad_clip: Optional[float] = typer.Option(None, help="Max gradient norm [1.0]."),
    warmup: Optional[float] = typer.Option(None, help="Warmup fraction of steps [0.03]."),
    batch_size: Optional[int] = typer.Option(None, help="Batch size [1]."),
    patience: Optional[int] = typer.Option(None, help="Early stopping patience on val loss [3]."),
    val_rows: Optional[int] = typer.Option(None, help="Validation rows [500]."),
    train_rows: Optional[int] = typer.Option(None, help="Training rows [all]."),
    min_score: Optional[float] = typer.Option(None, help="rlm-trajectories: keep episodes scoring at least this [0.5]."),
    include_test_split: bool = typer.Option(False, help="rlm-trajectories: allow transcripts of test rows (contaminates the benchmark)."),
    max_seq_len: Optional[int] = typer.Option(None, help="Longest example in tokens [the model's context]."),
    text_budget_chars: Optional[int] = typer.Option(None, help="single-pass-text: serialized characters [fitted to max_seq_len]."),
    out: Optional[Path] = typer.Option(None, help="Output dir [models/<name>]."),
    overwrite: bool = typer.Option(False, help="Replace an existing output dir."),
) -> None:
    """Supervised baselines: the classical features + gradient-boosted heads, or LoRA/full SFT of a language model."""
    if model == "classical":
        _train_classical(data[0] if data else Path("data/anomalyxl") / f"seed{seed}", out or Path("models/classical"), seed)
        return
    from tsbench.train.sft import RichSFTProgress, SFTConfig, load_sft_config, run_sft

    flags = {
        "model": model, "format": format, "data": [str(d) for d in data] if data else None, "regime": regime,
        "lora_r": lora_r, "lora_alpha": lora_alpha, "lora_dropout": lora_dropout, "target": target,
        "full": full or None, "epochs": epochs, "lr": lr, "weight_decay": weight_decay, "grad_clip": grad_clip,
        "warmup": warmup, "batch_size": batch_size, "patience": patience, "val_rows": val_rows,
        "train_rows": train_rows, "min_score": min_score, "include_test_split": include_test_split or None,
        "max_seq_len": max_seq_len, "text_budget_chars": text_budget_chars, "out": str(out) if out else None,
        "overwrite": overwrite or None,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    try:
        cfg = load_sft_config(config, **given) if config else SFTConfig(**given)
    except (TypeError, FileNotFoundError) as exc:
        raise UserError(f"bad SFT settings: {exc}") from None
    with RichSFTProgress(console=err_console) as progress:
        path = run_sft(cfg, progress)
    console.print(f"wrote {path}  (evaluate: tsbench eval --model local/{path})")


def _train_classical(data_dir: Path, out: Path, seed: int) -> None:
    from tsbench.baselines.classical import train_classical

    if not data_dir.is_dir():
        raise UserError(f"no dataset at {data_dir} (create it with: tsbench generate --split all)")
    bars = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=err_console)
    tasks: dict[str, int] = {}

    def progress(what: str, done: int, total: int) -> None:
        if what not in tasks:
            tasks[what] = bars.add_task(what, total=total)
        bars.update(tasks[what], completed=done, total=total)

    with bars:
        report = train_classical(data_dir, out, progress, seed=seed)
    console.print(report)
    console.print(f"wrote {out}  (evaluate: tsbench eval --model classical/{out})")


@app.command("train-grpo")
def train_grpo_cmd(
    model: Optional[str] = typer.Option(None, help="Policy: local/smollm2-135m, local/<dir> (e.g. an sft-baseline output), an HF id or a path."),
    config: Optional[Path] = typer.Option(None, help="A TOML file from experiments/grpo/; flags override it."),
    lora: Optional[int] = typer.Option(None, help="Train a LoRA adapter of this rank."),
    full: bool = typer.Option(False, help="Train all parameters (the paper's run)."),
    steps: Optional[int] = typer.Option(None, help="Optimizer steps [300]."),
    group_size: Optional[int] = typer.Option(None, help="Rollouts per task, G [8]."),
    batch_size: Optional[int] = typer.Option(None, help="Rollouts per step [128]; tasks per step = batch / G."),
    max_turns: Optional[int] = typer.Option(None, help="Replies per episode [15]."),
    max_seq_len: Optional[int] = typer.Option(None, help="Tokens per episode [65536]."),
    max_new_tokens: Optional[int] = typer.Option(None, help="Tokens per reply [4096]."),
    lr: Optional[float] = typer.Option(None, help="Learning rate [1e-6]."),
    advantage: Optional[str] = typer.Option(None, help="dr-grpo (paper) or grpo (TimeMaster) [dr-grpo]."),
    kl_beta: Optional[float] = typer.Option(None, help="KL weight to the frozen reference [0; TimeMaster 0.001]."),
    reward: Optional[str] = typer.Option(None, help="anomalyxl (penalised score) or composite (TimeMaster) [anomalyxl]."),
    judge: Optional[str] = typer.Option(None, help="composite: the LLM judge's provider/name."),
    categories: Optional[list[str]] = typer.Option(None, help="Task categories (comma-separated) [the five precise ones]."),
    lengths: Optional[list[str]] = typer.Option(None, help="Series lengths (comma-separated) [the preset's grid]."),
    preset: Optional[str] = typer.Option(None, help="Task grid: paper or small [paper]."),
    rollout_engine: Optional[str] = typer.Option(None, help="hf (transformers) or vllm (GPU) [hf]."),
    seed: Optional[int] = typer.Option(None, help="Seed for tasks, sampling and init."),
    out: Optional[Path] = typer.Option(None, help="Run dir [runs/grpo__<model>]."),
    resume: bool = typer.Option(False, help="Continue a run from its last checkpoint (model, optimizer, scheduler, RNG, step)."),
) -> None:
    """GRPO post-training of an RLM agent with fresh generator tasks every step."""
    from tsbench.train import RichProgress, load_grpo_config, train_grpo
    from tsbench.train.grpo import config_from_dict

    flags = {
        "model": model, "lora": lora, "full": True if full else None, "steps": steps, "group_size": group_size,
        "batch_size": batch_size, "max_turns": max_turns, "max_seq_len": max_seq_len, "max_new_tokens": max_new_tokens,
        "lr": lr, "advantage": advantage, "kl_beta": kl_beta, "reward": reward, "judge": judge,
        "categories": tuple(c) if (c := _split_list(categories)) else None,
        "lengths": tuple(n) if (n := _ints(lengths, "--lengths")) else None,
        "preset": preset, "rollout_engine": rollout_engine, "seed": seed, "out": str(out) if out else None,
        "resume": True if resume else None,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    if config is not None:
        cfg = load_grpo_config(config, **given)
    else:
        if "model" not in given:
            raise UserError("--model is required (or a --config that sets model)")
        cfg = config_from_dict(given, where="flags")
    with RichProgress(err_console) as progress:
        run_dir = train_grpo(cfg, progress)
    console.print(f"wrote {run_dir}  (evaluate: tsbench eval --model local/{run_dir}/final)")


memory_app = typer.Typer(help="TimeClaw episodic memory banks.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")


@memory_app.command("build")
def memory_build(
    from_runs: list[Path] = typer.Option(..., "--from", help="Run dir(s) under results/ to learn from."),
    out: Path = typer.Option(..., help="Bank parquet to write, e.g. banks/<name>.parquet."),
    min_score: float = typer.Option(0.5, help="Keep episodes scoring at least this."),
    embedder: str = typer.Option("minilm", help="Context encoder: minilm (offline), openai/<model>, or none."),
    append: bool = typer.Option(False, help="Add to an existing bank instead of replacing it."),
) -> None:
    """Build an episodic memory bank (fingerprint, context embedding, trajectory summary) from eval runs."""
    from tsbench.memory import build_memory

    for run in from_runs:
        if not (run / "run.json").is_file():
            raise UserError(f"{run} is not a run dir (no run.json)")
    try:
        path = build_memory(from_runs, min_score=min_score, out=out, embedder=embedder, append=append)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    console.print(f"wrote {path}")


@app.command()
def evolve(
    from_runs: list[Path] = typer.Option(..., "--from", help="Run dir(s) whose successful trajectories seed new tools."),
    model: str = typer.Option(..., help="The model that writes tools (provider/name)."),
    out: Path = typer.Option(..., help="Tools dir; admitted tools go to <out>/<name>/."),
    gamma: float = typer.Option(0.7, help="Admit a tool only if its held-out success rate is at least this."),
    min_score: float = typer.Option(0.5, help="Trajectories scoring at least this count as successful."),
    categories: Optional[list[str]] = typer.Option(None, help="Only these categories (comma-separated)."),
) -> None:
    """Write tools from experience, verify them in the sandbox on held-out tasks, keep those that pass."""
    from tsbench.harness.evolve import evolve_tools
    from tsbench.models.registry import get_model

    for run in from_runs:
        if not (run / "run.json").is_file():
            raise UserError(f"{run} is not a run dir (no run.json)")
    try:
        writer = get_model(model)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        report = evolve_tools(from_runs, writer, out, gamma=gamma, min_score=min_score, categories=_split_list(categories))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    finally:
        writer.close()
    console.print(report)
    console.print(f"report: {out}/evolve_report.json")


def _require_file(path: Path) -> None:
    if not path.is_file():
        raise UserError(f"no such file: {path}")


def main() -> None:
    try:
        app()
    except (UserError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    main()
