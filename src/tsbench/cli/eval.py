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

from tsbench.cli.common import console, err_console, is_terminal, progress_bar, require_run_dir
from tsbench.cli.options import given_settings, settings_options
from tsbench.core import json_input
from tsbench.core.config import build, read_toml_table
from tsbench.core.errors import UserError
from tsbench.core.sanitize import terminal_text
from tsbench.eval.config import EvalConfig
from tsbench.eval.config_keys import config_key_refusals
from tsbench.eval.model_args import task_settings
from tsbench.results.records import transcript_events

LOG_EVERY_S = 5.0


@settings_options(EvalConfig)
def eval_cmd(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(
        None,
        help="A TOML file from experiments/ ([eval] table; harness "
        "sections [eval.rlm], [eval.tools], [eval.memory], [eval.file-agent]); "
        "flags override it.",
    ),
    task_arg: Optional[list[str]] = typer.Option(  # noqa: UP045 - typer needs a runtime type
        None,
        "-T",
        "--task-arg",
        help="KEY=VALUE, repeatable (as inspect's -T): any setting by its name, e.g. -T regime=precise "
        "-T categories=localize; flags named in full win.",
        metavar="KEY=VALUE",
        show_default=False,
    ),
    trust_config_keys: bool = typer.Option(
        False,
        "--trust-config-keys",
        help="Send the API keys a --config file names (api_key_env, judge_api_key_env) to the servers it "
        "names, and the keys Ray workers get to the cluster it names (ray_address); without it, a key only "
        "the file names goes to its provider's own endpoint only, and no key to a cluster only the file names.",
    ),
) -> None:
    """Evaluate a model under a harness; re-running the same command resumes.

    Every setting is a flag of its field's name and a key of the [eval] table (src/tsbench/eval/config.py,
    src/tsbench/harness/episode.py)."""
    from tsbench.eval.runner import RunProgress, run_eval

    settings = read_toml_table(config, "eval") if config else {}
    from_file = dict(settings)
    settings.update(task_settings(task_arg))
    flags = given_settings(ctx, EvalConfig)
    for name in ("tools_dir", "memory_bank"):
        if flags.get(name) is not None and not Path(flags[name]).exists():
            raise UserError(f"no such file or directory: {flags[name]}")
    settings.update(flags)
    if "text_budget_chars" not in settings and (trained := _trained_text_budget(str(settings.get("model", "")))):
        settings["text_budget_chars"] = trained
    cfg = build(EvalConfig, settings, where=f"setting in {config}" if config else "setting")
    if not trust_config_keys and (refused := config_key_refusals(cfg, from_file, {**task_settings(task_arg), **flags})):
        raise UserError(f"{config}: {refused[0]}")

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
        err_console.print(
            f"interrupted: waiting for {in_flight} episode(s) in flight (Ctrl-C again to abandon them)", markup=False
        )

    try:
        run_dir = run_eval(cfg, progress=state, on_update=on_update, on_interrupt=on_interrupt)
    except KeyboardInterrupt as exc:
        bars.stop()
        from tsbench.eval.executors import Abandoned

        if isinstance(exc, Abandoned):
            err_console.print(
                "abandoned the episodes in flight; finished rows are saved: run the same command to resume",
                markup=False,
            )
            os._exit(130)  # worker threads may still be inside a model call; do not wait for them
        err_console.print("interrupted: finished rows are saved; run the same command to resume", markup=False)
        raise typer.Exit(130) from None
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
            name,
            str(block["n"]),
            "—" if block["mean"] is None else f"{block['mean']:.3f}",
            "" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}" + ("*" if block["small_n"] else ""),
            str(block["errors"]) if block["errors"] else "",
            "—" if block["mean_turns"] is None else f"{block['mean_turns']:.1f}",
            f"{block['input_tokens'] + block['output_tokens']:,}",
            "—" if block["cost_usd"] is None else f"{block['cost_usd']:.4f}",
        )
    console.print(table)
    if any(b["small_n"] for _, b in rows if b["n"]):
        console.print("* fewer than 10 scored rows: the interval is rough")
    _print_protocol_metrics(results.get("tasks") or {})
    overall = blocks["overall"]
    if overall["errors"]:
        err_console.print(
            f"{overall['errors']} of {overall['rows']} rows are errors (not scored; see `tsbench show "
            f"{run_dir}`); run the same command to retry them",
            markup=False,
        )
    if not results["complete"]:
        err_console.print("the run is incomplete", markup=False)
    if fails(overall["errors"], overall["rows"], cfg.fail_on_error):
        raise typer.Exit(1)


def _print_protocol_metrics(tasks: dict) -> None:
    """The benchmark's own number where it aggregates its own way (CiK's RCRPS), beside the mean scores."""
    own = {name: t for name, t in tasks.items() if t.get("protocol") and t.get(t.get("primary", "")) is not None}
    if not own:
        return
    first = next(iter(own.values()))
    title = first["protocol"] + (" (lower is better)" if first.get("lower_is_better") else "")
    table = Table("task", "n", first["metric"], title=title)
    for name, task in own.items():
        table.add_row(name, str(task.get(f"{task['primary']}_n", task["n"])), f"{task[task['primary']]:.4f}")
    console.print(table)


def _trained_text_budget(model: str) -> Optional[int]:
    """A model trained by sft-baseline records the prompt budget it learned with; eval reuses it."""
    if not model.startswith("local/"):
        return None
    manifest = Path(model.split("/", 1)[1]) / "run.json"
    if not manifest.is_file():
        return None
    try:
        return json_input.read_json(manifest).get("eval_hint", {}).get("text_budget_chars")
    except (ValueError, AttributeError):
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
            table.add_row(
                Text(terminal_text(rec["id"])),
                str(rec["epoch"]),
                "-" if failed else f"{rec['score']:.3f}",
                str(rec["turns"]),
                Text(terminal_text(rec["error_type"]) if failed else ""),
            )
        console.print(table)
        return
    match = samples[(samples["id"] == sample_id) & (samples["epoch"] == epoch)]
    if match.empty:
        ids = list(dict.fromkeys(samples["id"]))
        listed = ", ".join(ids[:3]) + (f" (and {len(ids) - 3} more: tsbench show {run})" if len(ids) > 3 else "")
        raise UserError(f"no sample {sample_id!r} (epoch {epoch}) in {run}; its rows: {listed or 'none yet'}")
    rec = match.iloc[0].to_dict()

    def panel(body: str, title: str, style: str) -> Panel:  # model text: never markup, never a terminal control
        return Panel(Text(terminal_text(body)), title=escape(terminal_text(title)), border_style=style)

    for event in transcript_events(rec):
        role = event.get("role")
        if role == "tool":
            for cell in event.get("cells", []):
                console.print(
                    Panel(
                        Syntax(terminal_text(cell["code"]), "python", word_wrap=True),
                        title=escape(terminal_text(f"code (turn {event['turn']})")),
                        border_style="cyan",
                    )
                )
            if "cells" not in event and event.get("name"):
                console.print(
                    panel(
                        json.dumps(event.get("arguments")),
                        f"tool call {event['name']} (turn {event.get('turn')})",
                        "cyan",
                    )
                )
            images = f" + {len(event['images'])} image(s)" if event.get("images") else ""
            console.print(panel(event.get("observation", ""), f"observation{images}", "yellow"))
        elif role == "assistant":
            console.print(
                panel(
                    event["content"],
                    f"assistant (turn {event.get('turn', 1)}, {event.get('output_tokens', 0)} tokens out)",
                    "green",
                )
            )
        elif role == "sub_rlm":
            console.print(panel(f"Q: {event['question']}\nA: {event['final']}", "sub_rlm call", "magenta"))
        else:
            console.print(panel(event.get("content", json.dumps(event)), role or "event", "white"))
    failed = isinstance(rec["error_type"], str)
    score_text = f"error ({rec['error_type']}): {rec['error']}" if failed else f"{rec['score']:.3f}"
    parsed = (
        rec["parsed_answer"] if isinstance(rec["parsed_answer"], str) else f"(nothing parseable: {rec['answer_error']})"
    )
    console.print(panel(f"parsed: {parsed}\ngold:   {rec['gold']}\nscore:  {score_text}", "result", "bold"))
