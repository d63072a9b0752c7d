"""`eval` and `show`: run a model on a task family, then read what it did."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.progress import TextColumn
from rich.table import Table
from rich.text import Text

from tsbench.cli.common import (REPORT_TO_HELP, console, err_console, given, ints, is_terminal, progress_bar,
                                 require_run_dir, split_list)
from tsbench.core.config import build, field_names, read_toml_table
from tsbench.core.errors import UserError
from tsbench.eval.config import EvalConfig
from tsbench.harness.episode import HarnessConfig
from tsbench.models.retry import DEFAULT_TIMEOUT_S, RetryPolicy

EC, HC, RETRY = EvalConfig(), HarnessConfig(), RetryPolicy()
LOG_EVERY_S = 5.0


def eval_cmd(
    ctx: typer.Context,
    model: str = typer.Option("", show_default=False, help="provider/name: gpt-4.1-mini, openai/..., vllm/<hf-id>, local/smollm2-135m, "
                                       "scripted/zscore, classical/<dir>, detector/default."),
    harness: str = typer.Option("", show_default=False, help="single-pass-text, single-pass-image, rlm, rlm-image, tools, tools-image, or "
                                         "direct (reference policies) [default: rlm; direct for detector/ and classical/]."),
    family: str = typer.Option(EC.family, help="Task family (or module:attribute for one of your own)."),
    config: Optional[Path] = typer.Option(None, help="A TOML file from experiments/ ([eval] table); flags override it."),
    data: Optional[list[Path]] = typer.Option(None, help="Dataset file(s) or a seed dir [data/<family>/seed<seed>]."),
    seed: int = typer.Option(EC.seed, help="Dataset seed; also shuffles the --limit draw."),
    split: str = typer.Option(EC.split, help="Dataset split."),
    regime: str = typer.Option(EC.regime, help="AnomalyXL: precise, coarse or both."),
    categories: Optional[list[str]] = typer.Option(None, help="Only these categories (comma-separated)."),
    lengths: Optional[list[str]] = typer.Option(None, help="Only these series lengths (comma-separated)."),
    sample_ids: Optional[list[str]] = typer.Option(None, "--sample-id", help="Only these sample ids (repeat or comma-separate)."),
    limit: Optional[int] = typer.Option(None, help="At most N rows per category, spread over lengths, shuffled by --seed; a larger N extends the run (TimeSage sequential or with skills: N whole scenarios per tier)."),
    epochs: int = typer.Option(EC.epochs, help="Episodes per row."),
    executor: str = typer.Option(EC.executor, help="threads (this process) or ray (pip install 'tsbench[ray]')."),
    concurrency: int = typer.Option(EC.concurrency, "--concurrency", "--workers", help="Episodes in parallel (threads) or Ray workers."),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster: auto or HOST:PORT [a local cluster]."),
    max_turns: int = typer.Option(HC.max_turns, help="Model replies per episode."),
    depth: int = typer.Option(HC.depth, help="sub_rlm recursion depth."),
    max_tokens: Optional[int] = typer.Option(None, help="Max tokens per model reply (also local models' max new tokens)."),
    temperature: Optional[float] = typer.Option(None, help="Sampling temperature [provider default]."),
    observation_chars: int = typer.Option(HC.observation_chars, help="Characters of kernel output shown per turn."),
    max_figures: int = typer.Option(HC.max_figures, help="Figures returned per turn (image harnesses)."),
    cell_timeout_s: float = typer.Option(HC.cell_timeout_s, "--cell-timeout", help="Seconds per code cell before interrupt/restart."),
    memory_gib: float = typer.Option(HC.memory_gib, help="Kernel memory cap in GiB."),
    episode_token_cap: Optional[int] = typer.Option(None, help="End an episode (as an error) past this many tokens."),
    episode_wall_s: Optional[float] = typer.Option(None, "--episode-timeout", "--episode-wall-s",
                                                   help="End an episode (as an error) past this many seconds."),
    text_budget_chars: int = typer.Option(HC.text_budget_chars, help="single-pass-text: characters of serialized values."),
    tools_dir: Optional[Path] = typer.Option(None, "--tools", help="Evolved tools dir (tsbench evolve --out) for --harness tools."),
    tool_protocol: str = typer.Option(HC.tool_protocol, help="Tool calls: native (OpenAI tools), json (text protocol) or auto."),
    max_tool_calls: int = typer.Option(HC.max_tool_calls, help="Tool calls per reply."),
    memory_bank: Optional[Path] = typer.Option(None, "--memory", help="Episodic memory bank (tsbench memory build) prefixed to prompts."),
    top_k: int = typer.Option(HC.top_k, help="Precedents retrieved from --memory."),
    memory_pool: int = typer.Option(HC.memory_pool, help="Stage-1 retrieval pool (cosine on the context embedding)."),
    unsafe_sandbox: bool = typer.Option(False, help="Run kernels WITHOUT the bubblewrap jail (recorded in run.json and on the leaderboard)."),
    mode: str = typer.Option(HC.mode, help="TimeSage: independent (fresh state each period) or sequential (state, score feedback and compaction carried across a scenario's periods)."),
    skills: bool = typer.Option(HC.skills, help="TimeSage: the TimeSage-1.0 skill library (induct_skill / retrieve_skill, usable from the next period)."),
    judge: Optional[str] = typer.Option(None, help="TimeSage: judge of coverage, faithfulness and quality, a model spec or judge/rules (offline) [judge/rules]."),
    compaction_tokens: int = typer.Option(HC.compaction_tokens, help="TimeSage sequential: compact memory at the next period once a step's input exceeds this."),
    period_steps: int = typer.Option(HC.period_steps, help="TimeSage: model replies per period."),
    period_wall_s: float = typer.Option(HC.period_wall_s, help="TimeSage: seconds per period; past it the period ends without an answer."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible server URL (or OPENAI_BASE_URL)."),
    client_timeout_s: Optional[float] = typer.Option(None, "--client-timeout", help=f"Seconds per model call before it is retried (provider default: {DEFAULT_TIMEOUT_S:.0f})."),
    max_attempts: Optional[int] = typer.Option(None, help=f"Tries per model call before the row becomes an error row (provider default: {RETRY.max_attempts})."),
    retry_delay_s: Optional[float] = typer.Option(None, "--retry-delay", help=f"First retry delay in seconds, doubled each time (provider default: {RETRY.base_delay_s:g}; "
                                     f"429s wait {RETRY.rate_limit_base_delay_s / RETRY.base_delay_s:g}x longer)."),
    fail_on_error: float = typer.Option(EC.fail_on_error, help="Error rows tolerated before a non-zero exit: a share below 1, a count from 1."),
    out: Optional[Path] = typer.Option(None, help="Run dir [results/<model>__<harness>]."),
    overwrite: bool = typer.Option(False, help="Discard an existing run with different settings."),
    report_to: Optional[list[str]] = typer.Option(None, help=REPORT_TO_HELP),
) -> None:
    """Evaluate a model under a harness; re-running the same command resumes."""
    from tsbench.eval.runner import RunProgress, run_eval

    settings = read_toml_table(config, "eval") if config else {}
    flags = given(ctx, field_names(EvalConfig))
    for name in ("categories", "sample_ids", "report_to"):
        if name in flags:
            flags[name] = split_list(flags[name])
    if "lengths" in flags:
        flags["lengths"] = ints(flags["lengths"], "--lengths")
    for name in ("data",):
        if name in flags:
            flags[name] = [str(p) for p in flags[name]]
    for name in ("tools_dir", "memory_bank", "out"):
        if name in flags:
            if name != "out" and not Path(flags[name]).exists():
                raise UserError(f"no such file or directory: {flags[name]}")
            flags[name] = str(flags[name])
    settings.update(flags)
    if "text_budget_chars" not in settings and (trained := _trained_text_budget(settings.get("model", ""))):
        settings["text_budget_chars"] = trained
    cfg = build(EvalConfig, settings, where=f"setting in {config}" if config else "setting")

    state = RunProgress()
    bars = progress_bar(TextColumn("{task.fields[info]}"))
    bar = bars.add_task(cfg.model, total=None, info="starting")
    started, last_log = time.monotonic(), [0.0]

    def log_line(p: RunProgress) -> None:
        last_log[0] = time.monotonic()
        err_console.print(f"{p.done}/{p.total} rows  {_info(p)}  {last_log[0] - started:.0f} s", markup=False)

    def on_update(p: RunProgress) -> None:
        if is_terminal():
            if not bars.live.is_started:
                bars.start()
            bars.update(bar, description=f"{cfg.model} / {cfg.harness}", total=p.total, completed=p.done, info=_info(p))
        elif time.monotonic() - last_log[0] >= LOG_EVERY_S or p.done == p.total:
            log_line(p)

    def heartbeat() -> None:
        """In a log, a line every LOG_EVERY_S even while no row finishes (a slow or hung server)."""
        while not finished.wait(LOG_EVERY_S):
            if state.total and time.monotonic() - last_log[0] >= LOG_EVERY_S:
                log_line(state)

    finished = threading.Event()
    if not is_terminal():
        threading.Thread(target=heartbeat, name="eval-heartbeat", daemon=True).start()

    def on_interrupt(in_flight: int) -> None:
        bars.stop()
        err_console.print(f"interrupted: waiting for {in_flight} episode(s) in flight (Ctrl-C again to abandon them)",
                          markup=False)

    try:
        run_dir = run_eval(cfg, progress=state, on_update=on_update, on_interrupt=on_interrupt)
    except KeyboardInterrupt as exc:
        bars.stop()
        from tsbench.eval.executors import Abandoned

        if isinstance(exc, Abandoned):
            err_console.print("abandoned the episodes in flight; finished rows are saved: run the same command to resume",
                              markup=False)
            os._exit(130)  # worker threads may still be inside a model call; do not wait for them
        err_console.print("interrupted: finished rows are saved; run the same command to resume", markup=False)
        raise typer.Exit(130)
    finally:
        finished.set()
    bars.stop()
    for note in state.notes:
        err_console.print(f"warning: {note}", markup=False)
    _print_summary(run_dir, cfg)


def _info(p) -> str:
    overall = p.overall()
    score = f"score {overall[0]:.3f} ± {overall[1]:.3f}" if overall else "score —"
    cost = f"  ${p.cost_usd:.2f}" if p.cost_usd else ""
    return f"{score}  errors {p.errors}  tokens {p.input_tokens + p.output_tokens:,}{cost}"


def _print_summary(run_dir: Path, cfg: EvalConfig) -> None:
    from tsbench.results import RESULTS_JSON
    from tsbench.results.summary import fails

    results = json.loads((run_dir / RESULTS_JSON).read_text())
    blocks = results["results"]
    title = f"{cfg.model} / {cfg.harness}: {run_dir}"
    if results.get("reference"):
        title += f"  (reference policy: {results['reference']})"
    table = Table("category", "n", "mean", "95% CI", "errors", "turns", "tokens", "cost $", title=title)
    rows = [(b["category"], b) for b in blocks["categories"]] + [("overall", blocks["overall"])]
    for name, block in rows:
        ci = block["ci95"]
        table.add_row(
            name, str(block["n"]), "—" if block["mean"] is None else f"{block['mean']:.3f}",
            "" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}" + ("*" if block["small_n"] else ""),
            str(block["errors"]) if block["errors"] else "",
            "—" if block["mean_turns"] is None else f"{block['mean_turns']:.1f}",
            f"{block['input_tokens'] + block['output_tokens']:,}",
            "—" if block["cost_usd"] is None else f"{block['cost_usd']:.4f}",
        )
    console.print(table)
    if any(b["small_n"] for _, b in rows if b["n"]):
        console.print("* fewer than 10 scored rows: the interval is rough")
    overall = blocks["overall"]
    if overall["errors"]:
        err_console.print(f"{overall['errors']} of {overall['rows']} rows are errors (not scored; see `tsbench show "
                          f"{run_dir}`); run the same command to retry them", markup=False)
    if not results["complete"]:
        err_console.print("the run is incomplete", markup=False)
    if fails(overall["errors"], overall["rows"], cfg.fail_on_error):
        raise typer.Exit(1)


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


def show(
    run: Path = typer.Argument(..., help="A run dir under results/."),
    sample_id: Optional[str] = typer.Option(None, "--id", help="Show this sample's transcript."),
    epoch: int = typer.Option(0, help="Which epoch of --id."),
) -> None:
    """List a run's rows, or replay one episode: messages, code, observations, score."""
    from rich.syntax import Syntax

    from tsbench.results import load_samples

    require_run_dir(run)
    samples = load_samples(run)
    if sample_id is None:
        table = Table("id", "epoch", "score", "turns", "error", title=str(run))
        for rec in samples.to_dict("records"):
            failed = isinstance(rec["error_type"], str)
            table.add_row(Text(rec["id"]), str(rec["epoch"]), "-" if failed else f"{rec['score']:.3f}", str(rec["turns"]),
                          Text(rec["error_type"] if failed else ""))
        console.print(table)
        return
    match = samples[(samples["id"] == sample_id) & (samples["epoch"] == epoch)]
    if match.empty:
        raise UserError(f"no sample {sample_id!r} (epoch {epoch}) in {run}")
    rec = match.iloc[0].to_dict()

    def panel(body: str, title: str, style: str) -> Panel:  # model text is shown literally, never as markup
        return Panel(Text(str(body)), title=escape(title), border_style=style)

    for event in json.loads(rec["transcript"]):
        role = event.get("role")
        if role == "tool":
            for cell in event.get("cells", []):
                console.print(Panel(Syntax(cell["code"], "python", word_wrap=True), title=f"code (turn {event['turn']})",
                                    border_style="cyan"))
            if "cells" not in event and event.get("name"):
                console.print(panel(json.dumps(event.get("arguments")), f"tool call {event['name']} (turn {event.get('turn')})", "cyan"))
            images = f" + {len(event['images'])} image(s)" if event.get("images") else ""
            console.print(panel(event.get("observation", ""), f"observation{images}", "yellow"))
        elif role == "assistant":
            console.print(panel(event["content"], f"assistant (turn {event.get('turn', 1)}, {event.get('output_tokens', 0)} tokens out)", "green"))
        elif role == "sub_rlm":
            console.print(panel(f"Q: {event['question']}\nA: {event['final']}", "sub_rlm call", "magenta"))
        else:
            console.print(panel(event.get("content", json.dumps(event)), role or "event", "white"))
    failed = isinstance(rec["error_type"], str)
    score_text = f"error ({rec['error_type']}): {rec['error']}" if failed else f"{rec['score']:.3f}"
    parsed = rec["parsed_answer"] if isinstance(rec["parsed_answer"], str) else f"(nothing parseable: {rec['answer_error']})"
    console.print(panel(f"parsed: {parsed}\ngold:   {rec['gold']}\nscore:  {score_text}", "result", "bold"))
