"""`eval` and `show`: run a model on a task family, then read what it did."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from tsbench.cli.common import console, err_console, require_run_dir
from tsbench.cli.options import given_settings, harness_arg_option, harness_flags, settings_options
from tsbench.core import json_input
from tsbench.core.config import read_toml_table
from tsbench.core.errors import UserError
from tsbench.core.own_folder import config_overwrite_refusal
from tsbench.core.sanitize import display_name, terminal_text
from tsbench.eval.config import EvalConfig
from tsbench.eval.model_args import harness_args, task_settings
from tsbench.harness.settings import build_run

# --help in the order a user reaches for settings: what runs, on what, how, how much, where it goes.
PANELS = {
    "Model": (
        "model",
        "base_url",
        "model_args",
        "api_key_env",
        "price",
        "client_timeout_s",
        "max_attempts",
        "retry_delay_s",
    ),
    "Data": ("family", "data", "data_root", "seed", "split", "regime", "categories", "lengths", "sample_ids"),
    "Harness": ("harness", "max_turns", "max_tokens", "temperature", "unsafe_sandbox", "cell_timeout_s", "memory_gib"),
    "Limits": ("limit", "limit_per_category", "epochs", "episode_token_cap", "episode_wall_s", "concurrency"),
    "Output": ("out", "log_dir", "new_run", "overwrite", "fail_on_error", "report_to"),
}


@settings_options(EvalConfig, panels=PANELS)
def eval_cmd(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(
        None,
        help="A TOML file from experiments/ ([eval] table; the harness's own settings in [eval.<harness>], "
        "the memory wrapper's in [eval.memory]); flags override it.",
        rich_help_panel="Model",
    ),
    harness_arg: Optional[list[str]] = harness_arg_option("depth=1", "Harness"),  # noqa: UP045 - typer needs a runtime type
    task_arg: Optional[list[str]] = typer.Option(  # noqa: UP045 - typer needs a runtime type
        None,
        "-T",
        "--task-arg",
        help="KEY=VALUE, repeatable (as inspect's -T): any setting by its name, e.g. -T regime=precise "
        "-T categories=localize; flags named in full win.",
        metavar="KEY=VALUE",
        show_default=False,
        rich_help_panel="Other settings",
    ),
    trust_config_keys: bool = typer.Option(
        False,
        "--trust-config-keys",
        help="Send the API keys a --config file names (api_key_env, judge_api_key_env) to the servers it "
        "names, and the keys Ray workers get to the cluster it names (ray_address); without it, a key only "
        "the file names goes to its provider's own endpoint only, and no key to a cluster only the file names.",
        rich_help_panel="Model",
    ),
) -> None:
    """Evaluate a model under a harness; re-running the same command resumes.

    Every setting is a flag of its field's name and a key of the [eval] table (src/tsbench/eval/config.py);
    the chosen harness's own are flags too, keys of [eval.<harness>] and -H pairs (`--harness X --help`)."""
    from tsbench.cli.eval_progress import EvalDisplay
    from tsbench.eval.preflight import with_limit_note
    from tsbench.eval.runner import RunProgress, run_eval

    settings = read_toml_table(config, "eval") if config else {}
    from_file = dict(settings)
    settings.update(task_settings(task_arg))
    settings.update(harness_pairs := harness_args(harness_arg))
    flags = {**given_settings(ctx, EvalConfig), **harness_flags(ctx)}
    for name in ("tools_dir", "memory_bank"):
        if flags.get(name) is not None and not Path(flags[name]).exists():
            raise UserError(f"no such file or directory: {flags[name]}")
    settings.update(flags)
    if "text_budget_chars" not in settings and (trained := _trained_text_budget(str(settings.get("model", "")))):
        settings["text_budget_chars"] = trained
    cfg = build_run(EvalConfig, settings, where=f"setting in {config}" if config else "setting")
    command_line = {**task_settings(task_arg), **harness_pairs, **flags}
    if from_file and not trust_config_keys:  # only a config file's keys are refused (and load the checks)
        from tsbench.eval.config_keys import config_key_refusals

        if refused := config_key_refusals(cfg, from_file, command_line):
            raise UserError(f"{config}: {refused[0]}")
    if refused := config_overwrite_refusal(config, from_file, command_line, cfg.out or cfg.log_dir or "results"):
        raise UserError(refused)

    state = RunProgress()
    display = EvalDisplay(_title(cfg))

    def on_interrupt(in_flight: int) -> None:
        display.stop()
        err_console.print(
            f"interrupted: waiting for {in_flight} episode(s) in flight (Ctrl-C again to abandon them)", markup=False
        )

    try:
        run_dir = run_eval(
            cfg, progress=state, on_update=with_limit_note(cfg, display.update), on_interrupt=on_interrupt
        )
    except KeyboardInterrupt as exc:
        display.stop()
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
        display.stop()
    for note in state.notes[display.shown_notes :]:
        err_console.print(f"warning: {note}", markup=False)
    _print_summary(run_dir, cfg)


eval_cmd.plays_harness = True  # the chosen harness's own settings are its options (cli/options.py)


def _title(cfg: EvalConfig) -> str:
    """The configuration, whole, on its own line above the progress line."""
    harness = cfg.harness or "its default harness"
    return f"eval {display_name(cfg.model)} / {display_name(harness)} on {cfg.family}"


def _print_summary(run_dir: Path, cfg: EvalConfig) -> None:
    from tsbench.cli.summary_table import WIDE, summary_table, usage_line
    from tsbench.results import RESULTS_JSON, results_json
    from tsbench.results.summary import fails, why_text

    results = json.loads((run_dir / RESULTS_JSON).read_text())
    blocks = results_json.summary_of(results)
    title = f"{display_name(cfg.model)} / {display_name(cfg.harness)}: {display_name(run_dir)}"
    if results.get("reference"):
        title += f"  (reference policy: {results['reference']})"
    console.print(summary_table(blocks, title, console.width))
    overall = blocks["overall"]
    notes = [f"rows: {why_text(overall)}"] if "valid" in overall else []
    if console.width < WIDE:
        notes.append(usage_line(overall))
    if any(b["small_n"] for b in [*blocks["categories"], overall] if b["n"]):
        notes.append("* fewer than 10 scored rows: the interval is rough")
    for note in notes:
        console.print(note, markup=False)
    _print_protocol_metrics(results.get("tasks") or {})
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
    from rich.table import Table

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


def _answer_kind(rec: dict) -> tuple[str, str]:
    """(valid | invalid | cut | error, why): what `show` prints beside a row's score."""
    from tsbench.results.summary import answer_kind

    kind = answer_kind(rec)
    if kind == "error":
        return kind, f"{rec['error_type']}: {rec['error'] or ''}".strip()
    if kind == "cut":
        n = int(rec["truncated_replies"])
        return kind, f"{n} repl{'y' if n == 1 else 'ies'} stopped by the token cap"
    return kind, "" if kind == "valid" else str(rec.get("answer_error") or "")


def show(
    run: Path = typer.Argument(..., help="A run dir under results/."),
    sample_id: Optional[str] = typer.Option(None, "--id", help="Show this sample's transcript."),
    epoch: int = typer.Option(0, help="Which epoch of --id."),
    by: Optional[str] = typer.Option(
        None, "--by", help="Group the rows by where they were played: node (host) or worker.", metavar="node|worker"
    ),
) -> None:
    """List a run's rows, or replay one episode: messages, code, observations, score."""
    from rich import box
    from rich.markup import escape
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.table import Table
    from rich.text import Text

    from tsbench.results import load_samples
    from tsbench.results.records import transcript_events

    if by is not None and by not in ("node", "worker"):
        raise UserError(f"--by must be node or worker (got {by!r})")
    if by is not None and sample_id is not None:
        raise UserError("--by groups a run's rows; it does not go with --id")
    require_run_dir(run)
    samples = load_samples(run)
    if by is not None:
        _show_by_origin(run, samples, by)
        return
    if sample_id is None:
        from tsbench.results.summary import answer_counts, why_text

        records = samples.to_dict("records")
        epochs = any(rec["epoch"] for rec in records)
        widest = max((len(terminal_text(rec["id"])) for rec in records), default=2)
        table = Table(title=str(run), box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, title_justify="left")
        table.add_column("id", no_wrap=True, min_width=widest)  # ids whole; `why` gives way first
        names = ["epoch"] * epochs + ["score", "answer", "turns"]
        for name in names:
            table.add_column(name, justify="left" if name == "answer" else "right", no_wrap=True, min_width=len(name))
        table.add_column("why", overflow="ellipsis", no_wrap=True)
        for rec in records:
            kind, why = _answer_kind(rec)
            cells = [str(rec["epoch"])] * epochs + ["-" if kind == "error" else f"{rec['score']:.3f}", kind]
            table.add_row(Text(terminal_text(rec["id"])), *cells, str(rec["turns"]), Text(terminal_text(why)))
        console.print(table)
        console.print(f"rows: {why_text(answer_counts(samples))}", markup=False)
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


def _show_by_origin(run: Path, samples, by: str) -> None:
    """`show --by node|worker`: one line per node or worker (results/origin.py)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from tsbench.results.origin import by_origin

    table = Table(
        title=f"{run} by {by}", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, title_justify="left"
    )
    frame = by_origin(samples, by)
    for name in frame.columns:
        table.add_column(name, justify="left" if name == by else "right", no_wrap=name == by)
    for line in frame.to_dict("records"):
        cells = []
        for name in frame.columns:
            value = line[name]
            if name in ("mean_score", "mean_latency_s"):
                cells.append("-" if value != value else f"{value:.3f}")  # NaN: no scored row there
            else:
                cells.append(terminal_text(str(value)))
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table)
