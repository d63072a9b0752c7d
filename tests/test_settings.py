"""Settings declared once: flags and TOML keys derived from the dataclass fields, every value
checked by type and range before any episode, unknown tables refused with a did-you-mean, resume
compared on every answer-changing setting with a diff, harness sections, and the judge's own
options reaching the judge."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from tsbench.cli import app, main
from tsbench.core.config import build, read_toml_table
from tsbench.core.errors import UserError
from tsbench.core.settings import specs
from tsbench.eval.config import EvalConfig, result_settings
from tsbench.eval.runner import run_eval
from tsbench.harness import HARNESSES, get_harness
from tsbench.harness.settings import own_settings
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.train.config import GRPOConfig
from tsbench.train.sft_config import SFTConfig

ROOT = Path(__file__).resolve().parents[1]


def _command(name: str):
    import click
    import typer.main

    group = typer.main.get_command(app)
    command = group.get_command(click.Context(group), name)
    return command.real() if hasattr(command, "real") else command  # train-grpo, sft-baseline load when run


def _flags(name: str) -> dict[str, object]:
    return {opt: p for p in _command(name).params for opt in p.opts}


@pytest.mark.parametrize(
    ("command", "cls"), [("eval", EvalConfig), ("train-grpo", GRPOConfig), ("sft-baseline", SFTConfig)]
)
def test_every_field_is_a_flag_of_its_own_name_with_a_docstring(command, cls):
    flags = _flags(command)
    for spec in specs(cls):
        if not spec.flag_wanted:  # TRL's own options are [grpo] keys only
            assert spec.flag not in flags, f"{command} shows TRL's {spec.flag}"
            continue
        assert spec.flag in flags, f"{command} lacks {spec.flag}"
        assert flags[spec.flag].name.split("__alias")[0] == spec.name
    undocumented = [s.name for s in specs(cls) if not s.doc]
    assert not undocumented, f"{cls.__name__} fields without a docstring: {undocumented}"


def test_eval_help_lists_every_harness_section_with_defaults(capsys):
    with pytest.raises(SystemExit):
        app(["eval", "--harness", "file-agent", "--help"], prog_name="tsbench")
    text = " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        app(["eval", "--harness", "tools", "--help"], prog_name="tsbench")
    text += " ".join(capsys.readouterr().out.split())
    for flag in (
        "--period-steps",
        "--period-wall-s",
        "--compaction-tokens",
        "--mode",
        "--skills",
        "--tools-dir",
        "--memory-bank",
        "--cell-timeout-s",
        "--judge-base-url",
        "--judge-api-key-env",
    ):
        assert flag in text
    assert "model replies per period. [default: 20]" in text.lower()
    assert "Seconds per code cell before interrupt/restart. [default: 300.0]" in text


def test_eval_help_groups_options_in_the_order_a_user_sets_them(capsys):
    """Model, data, harness, limits, output, then the rest; within Model the model itself first."""
    with pytest.raises(SystemExit):
        app(["eval", "--help"], prog_name="tsbench")
    lines = capsys.readouterr().out.splitlines()
    titles = [line.rstrip(":") for line in lines if line and not line[0].isspace() and line.endswith(":")]
    first = [t for t in titles if not t.startswith("Harness ")]  # the harness's own panels follow Harness
    assert first[:5] == ["Model", "Data", "Harness", "Limits", "Output"], titles
    assert titles.index("Harness") < titles.index("Harness [memory] settings") < titles.index("Limits")
    flags = [line.split()[0].rstrip(",") for line in lines if line.startswith("  -")]
    assert flags[0] == "--model", flags[:5]
    assert flags.index("--model") < flags.index("--config") < flags.index("--trust-config-keys") < flags.index("--data")
    assert flags.index("--harness") < flags.index("-H") < flags.index("--limit") < flags.index("--out")


def _cli(monkeypatch, capsys, *argv: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["tsbench", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return exit_info.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    "flag",
    [
        ["--cell-timeout-s", "0"],
        ["--cell-timeout", "-5"],
        ["--observation-chars", "-1"],
        ["--memory-gib", "-1"],
        ["--max-tokens", "0"],
        ["--limit", "two"],
        ["--lengths", "1024,big"],
        ["--epochs", "0"],
        ["--mode", "serial"],
    ],
)
def test_a_bad_value_is_one_line_and_exit_2_before_any_episode(monkeypatch, capsys, tmp_path, flag):
    code, err = _cli(monkeypatch, capsys, "eval", "--model", "scripted/zscore", "--out", str(tmp_path / "r"), *flag)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_toml_values_are_typed_and_unknown_tables_and_keys_get_a_did_you_mean(tmp_path):
    def toml(text: str) -> Path:
        path = tmp_path / f"c{len(list(tmp_path.iterdir()))}.toml"
        path.write_text(text)
        return path

    with pytest.raises(UserError, match=r"limit \(--limit\) takes an integer, got 'two'"):
        build(EvalConfig, read_toml_table(toml('[eval]\nlimit = "two"\n'), "eval"))
    with pytest.raises(UserError, match=r"unknown table \[evaluation\] \(did you mean eval\?\)"):
        read_toml_table(toml("[evaluation]\nlimit = 2\n"), "eval")
    with pytest.raises(UserError, match=r"unknown table \[evaluation\].*did you mean eval"):
        read_toml_table(toml('[eval]\nmodel = "x"\n[evaluation]\nlimit = 2\n'), "eval")
    with pytest.raises(UserError, match=r"limt.*did you mean limit\?"):
        build(EvalConfig, read_toml_table(toml("[eval]\nlimt = 2\n"), "eval"))
    with pytest.raises(UserError, match=r"cell_timeout_s \(--cell-timeout-s\) must be > 0"):
        build(EvalConfig, {"harness_config": {"cell_timeout_s": 0}})
    with pytest.raises(UserError, match=r"top_k \(--top-k\) is a setting of \[memory\]"):
        build(EvalConfig, read_toml_table(toml('[eval]\nharness = "tools"\n[eval.tools]\ntop_k = 2\n'), "eval"))
    cfg = build(
        EvalConfig,
        read_toml_table(
            toml('[eval]\nlengths = "1024, 2048"\nharness = "rlm"\n[eval.rlm]\ndepth = 1\n[eval.file-agent]\n'), "eval"
        ),
    )
    assert cfg.lengths == [1024, 2048] and cfg.harness_config.depth == 1  # [eval.file-agent] left at its defaults
    old = build(EvalConfig, {"harness": "file-agent", "harness_config": {"file_agent": {"period_steps": 3}}})
    assert old.harness_config.period_steps == 3  # the old nested spelling [eval.harness_config.file-agent]


def test_every_experiment_config_builds(tmp_path):
    tables = {"eval": EvalConfig, "grpo": GRPOConfig, "sft": SFTConfig}
    files = sorted((ROOT / "experiments").rglob("*.toml"))
    assert files
    for path in files:
        import tomllib

        data = tomllib.loads(path.read_text())
        for table in set(data) & set(tables):
            build(tables[table], read_toml_table(path, table), where=str(path))
        sectioned = {name for h in HARNESSES for name in own_settings(get_harness(h).settings_class)}
        flat_section_keys = [k for k in data.get("eval", {}) if k in sectioned]
        assert not flat_section_keys, f"{path}: harness settings belong in their section: {flat_section_keys}"


def test_resume_settings_are_derived_from_the_fields():
    names = set(result_settings(EvalConfig()))
    assert {
        "cell_timeout_s",
        "memory_gib",
        "episode_wall_s",
        "base_url",
        "observation_chars",
        "max_attempts",
        "retry_delay_s",
        "client_timeout_s",
        "judge_base_url",
        "model",
        "top_k",
    } <= names
    assert "mode" in set(result_settings(build(EvalConfig, {"harness": "file-agent"})))  # the chosen harness's own
    assert not names & {
        "out",
        "overwrite",
        "concurrency",
        "executor",
        "ray_address",
        "report_to",
        "limit",
        "categories",
        "sample_ids",
        "epochs",
        "fail_on_error",
    }


@pytest.fixture(scope="module")
def zscore_run(small_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "zscore"
    run_eval(
        EvalConfig(
            model="scripted/zscore",
            harness="single-pass-text",
            data=[str(small_data)],
            regime="precise",
            limit_per_category=1,
            concurrency=1,
            out=str(out),
        )
    )
    return out


def test_resume_with_a_changed_cell_timeout_is_refused_with_a_diff(monkeypatch, capsys, small_data, zscore_run):
    common = [
        "eval",
        "--model",
        "scripted/zscore",
        "--harness",
        "single-pass-text",
        "--data",
        str(small_data),
        "--regime",
        "precise",
        "--limit-per-category",
        "1",
        "--concurrency",
        "1",
        "--out",
        str(zscore_run),
    ]
    code, err = _cli(monkeypatch, capsys, *common, "--cell-timeout", "10", "--retry-delay-s", "2")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "cell_timeout_s: 300.0 → 10.0" in err and "retry_delay_s: None → 2.0" in err
    code, err = _cli(
        monkeypatch, capsys, *common, "--concurrency", "2", "--limit-per-category", "2"
    )  # no answer changes
    assert code in (0, None), err
    assert json.loads((zscore_run / "run.json").read_text())["settings"]["cell_timeout_s"] == 300.0


def test_a_setting_of_another_harness_is_refused(monkeypatch, capsys, small_data, tmp_path):
    code, err = _cli(
        monkeypatch,
        capsys,
        "eval",
        "--model",
        "scripted/zscore",
        "--harness",
        "rlm",
        "--data",
        str(small_data),
        "--max-tool-calls",
        "3",
        "--out",
        str(tmp_path / "r"),
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "max_tool_calls (--max-tool-calls) is a setting of [tools]" in err and "rlm" in err
    from tsbench.harness import HarnessSettings, get_harness, harness_settings
    from tsbench.harness.rlm import RLMSettings
    from tsbench.harness.tools import ToolsSettings

    def own(cls):
        return {f.name for f in dataclasses.fields(cls)} - {f.name for f in dataclasses.fields(HarnessSettings)}

    assert own(RLMSettings) == {"depth", "max_blocks_per_reply", "max_sub_rlm_calls"} and "max_tool_calls" in own(
        ToolsSettings
    )
    assert harness_settings(get_harness("rlm"), {"depth": "1"}) == RLMSettings(depth=1)
    assert get_harness("rlm").settings(HarnessSettings(max_turns=3)) == RLMSettings(max_turns=3)
    with pytest.raises(UserError, match=r"period_steps \(--period-steps\) is a setting of \[file-agent\]"):
        harness_settings(get_harness("tools"), {"period_steps": 3})
    with pytest.raises(UserError, match=r"depth \(--depth\) is a setting of \[rlm\], which harness tools"):
        get_harness("tools").settings(RLMSettings(depth=1))


def test_the_judge_gets_its_own_server_and_key(tmp_path, monkeypatch):
    from tsbench.tasks.timesage.generate import generate_from_options

    manifest, _ = generate_from_options({"seed": 42, "scenarios": 1, "periods": 1}, tmp_path / "ts")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the model's; the judge must not use it
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_JUDGE_KEY", "judge-secret")
    with FakeOpenAIServer(default="ok:YES") as server:
        cfg = build(
            EvalConfig,
            {
                "model": "scripted/timesage",
                "family": "timesage",
                "data": [str(manifest.parent)],
                "limit_per_category": 1,
                "categories": ["easy"],
                "concurrency": 1,
                "out": str(tmp_path / "run"),
                "judge": "openai/fake-model",
                "judge_base_url": server.base_url,
                "judge_api_key_env": "MY_JUDGE_KEY",
                "judge_max_attempts": 1,
            },
        )
        run_eval(cfg)
        requests, headers = server.request_count, list(server.headers)
    assert requests > 0
    assert all(h.get("Authorization", h.get("authorization")) == "Bearer judge-secret" for h in headers)


def test_a_judge_key_variable_that_is_not_set_stops_before_any_episode(tmp_path, monkeypatch, capsys):
    from tsbench.tasks.timesage.generate import generate_from_options

    manifest, _ = generate_from_options({"seed": 42, "scenarios": 1, "periods": 1}, tmp_path / "ts")
    monkeypatch.delenv("NO_SUCH_JUDGE_KEY", raising=False)
    code, err = _cli(
        monkeypatch,
        capsys,
        "eval",
        "--model",
        "scripted/timesage",
        "--family",
        "timesage",
        "--data",
        str(manifest.parent),
        "--judge",
        "openai/fake-model",
        "--judge-base-url",
        "http://127.0.0.1:9/v1",
        "--judge-api-key-env",
        "NO_SUCH_JUDGE_KEY",
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "NO_SUCH_JUDGE_KEY" in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("cls", [EvalConfig, GRPOConfig, SFTConfig])
def test_every_setting_refuses_a_value_of_the_wrong_type_or_out_of_range_in_one_line(cls):
    wrong = {bool: "maybe", int: "two", float: "fast", str: 5}
    for spec in specs(cls):
        if (
            spec.base is object
        ):  # a value passed through as TOML gives it (TRL's dict-or-str options), its owner checks it
            continue
        value = [wrong[spec.base]] if spec.is_list else wrong[spec.base]
        with pytest.raises(UserError, match=rf"^{spec.name} \({spec.flag}\) takes ") as error:
            build(cls, {spec.name: value})
        assert "\n" not in str(error.value)
        for key, step in (("gt", 0), ("ge", -1), ("lt", 0), ("le", 1)):
            if (bound := spec.meta.get(key)) is not None:
                bad = bound + step if spec.base is int else bound + step * 0.5
                with pytest.raises(UserError, match=rf"{spec.name} \({spec.flag}\) must be"):
                    build(cls, {spec.name: [bad] if spec.is_list else bad})


def test_the_kernel_limits_a_harness_hands_its_sandbox_carry_the_output_budgets():
    """rlm, tools and the file agent build their Sandbox from `kernel_limits()`: the host output budgets
    (MiB settings) arrive as the byte bounds Sandbox takes, with the timeout, memory cap and jail."""
    import inspect

    from tsbench.harness.rlm import RLMSettings
    from tsbench.harness.runtime.sandbox import Sandbox

    limits = RLMSettings(cell_output_mib=3, episode_output_mib=8, memory_gib=1).kernel_limits()
    assert limits["cell_output_bytes"] == 3 * 2**20 and limits["episode_output_bytes"] == 8 * 2**20
    assert limits["memory_bytes"] == 2**30 and limits["unsafe"] is False
    inspect.signature(Sandbox).bind({}, **limits)  # every limit is a Sandbox parameter
