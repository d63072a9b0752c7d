"""Agents and harnesses declare what they can do (issue 39): a pairing is refused from those
declarations, before any episode (and, for a built-in provider's model, before it is built); a
setting that does not apply to the harness is refused in one line, exit 2; reference policies
are one registry named one way, old spellings kept as aliases."""

from __future__ import annotations

import pytest

from tsbench.baselines import ALIASES, POLICIES, build_policy, canonical, is_reference
from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.eval.agents import Unbuilt, check_before_building, check_pairing
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import HARNESSES, HarnessSettings, get_harness, harness_settings
from tsbench.harness.tools import ToolsSettings
from tsbench.models.base import Agent, Completion, as_agent
from tsbench.models.local_hf import LocalHFModel
from tsbench.models.local_vlm import LocalVLMModel
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.vllm_server import VLLMChatModel


def problem(agent, harness: str, **settings) -> str | None:
    run = get_harness(harness)
    return run.pairing_problem(as_agent(agent), harness_settings(run, settings))


def test_every_harness_declares_its_capabilities_and_its_settings_class():
    declared = {name: get_harness(name).capabilities() for name in HARNESSES}
    assert {name for name, c in declared.items() if c["kernel"]} == {
        "rlm",
        "rlm-image",
        "tools",
        "tools-image",
        "file-agent",
    }
    assert {name: c["images"] for name, c in declared.items() if c["images"]} == {
        "single-pass-image": "prompt",
        "rlm-image": "observations",
        "tools-image": "observations",
    }
    assert {name for name, c in declared.items() if c["tools"]} == {"tools", "tools-image"}
    assert {name for name, c in declared.items() if c["chains"]} == {"file-agent"}
    assert {name for name, c in declared.items() if c["reference"]} == {"direct"}
    assert {name for name, c in declared.items() if not c["memory"]} == {"direct", "series", "file-agent"}
    assert get_harness("rlm-image").settings_class.__name__ == "RLMSettings"
    assert get_harness("single-pass-text").settings_class is HarnessSettings


def test_pairings_are_refused_from_what_agents_declare():
    assert problem(build_policy("detector/default"), "rlm") == "detector/default plays direct, not rlm"

    class Chat(Agent):
        name = "some/chat-model"

    assert "is for reference policies" in problem(Chat(), "direct") and problem(Chat(), "tools") is None
    assert (
        problem(build_policy("scripted/zscore"), "direct")
        == "scripted/zscore plays rlm, rlm-image, single-pass-text, not direct"
    )
    assert "plays rlm, rlm-image, single-pass-text, not tools" in problem(build_policy("scripted/zscore"), "tools")
    assert "no native function calling" in problem(build_policy("scripted/tools-json"), "tools", tool_protocol="native")
    assert problem(build_policy("scripted/tools-json"), "tools", tool_protocol="json") is None
    assert problem(build_policy("scripted/tools"), "tools", tool_protocol="native") is None
    assert problem(build_policy("detector/default"), "direct") is None

    class TextOnly(Agent):
        name = "text-only"

        @classmethod
        def sees_images(cls) -> bool:
            return False

    assert "reads text only" in problem(TextOnly(), "single-pass-image") and problem(TextOnly(), "rlm") is None
    assert "read the series natively" in problem(TextOnly(), "series")


def test_a_built_in_providers_model_class_answers_before_it_is_built():
    """vLLM has no native function calling and a text-only local model no eyes: refused from the class."""
    assert OpenAIChatModel.native_tools() and not VLLMChatModel.native_tools()
    assert not LocalHFModel.sees_images() and LocalVLMModel.sees_images()
    tools = get_harness("tools")
    native = harness_settings(tools, {"tool_protocol": "native"})
    assert "no native function calling" in tools.pairing_problem(Unbuilt(VLLMChatModel, "vllm/x"), native)
    assert tools.pairing_problem(Unbuilt(OpenAIChatModel, "gpt-x"), native) is None
    with pytest.raises(UserError, match="vllm/Qwen/Qwen2.5-0.5B-Instruct has no native function calling"):
        check_before_building("vllm/Qwen/Qwen2.5-0.5B-Instruct", tools, native)
    check_before_building("scripted/tools", tools, native)  # reference policies are built (cheaply) first


def test_an_agent_that_predates_the_base_is_read_through_its_attributes():
    class OldStyle:
        name = "old/style"
        native_tools = True
        harnesses = ("tools",)

        def generate(self, messages, **kwargs):
            return Completion("{}")

    agent = as_agent(OldStyle())
    assert agent.chats() and agent.native_tools() and agent.harnesses() == ("tools",)
    assert agent.generate([]).text == "{}" and agent.reference() is None
    assert problem(OldStyle(), "rlm") == "old/style plays tools, not rlm"
    check_pairing(agent, get_harness("tools"), ToolsSettings(tool_protocol="native"))


def test_reference_policies_are_one_registry_named_kind_slash_name():
    assert all("/" in name or name in ("detector", "classical") for name in POLICIES)
    assert all(name.split("/")[0] in ("scripted", "detector", "classical") for name in POLICIES)
    for old, new in ALIASES.items():
        assert canonical(old) == new and is_reference(old) and build_policy(old).name == new
    assert is_reference("scripted/zscore") and is_reference("classical/models/x") and not is_reference("gpt-4.1")
    assert build_policy("scripted/tools-json").name == "scripted/tools-json"
    with pytest.raises(UserError, match="unknown reference policy 'scripted/nope'; choose from scripted/zscore"):
        build_policy("scripted/nope")


def test_a_setting_that_does_not_apply_is_refused_before_any_episode(small_data, tmp_path, cli):
    bank = tmp_path / "bank.parquet"
    bank.write_bytes(b"not read: the refusal comes first")
    code, _, err = cli(
        "eval",
        "--model",
        "detector/default",
        "--harness",
        "direct",
        "--memory-bank",
        str(bank),
        "--data",
        str(small_data),
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "memory_bank (--memory-bank) is a setting of [memory], which harness direct does not have" in err
    assert not (tmp_path / "run").exists()
    cfg = build(EvalConfig, {"model": "scripted/timesage", "family": "timesage", "memory_bank": str(bank)})
    with pytest.raises(UserError, match=r"\[memory\], which harness file-agent does not have"):
        run_eval(cfg)  # the chain path (TimeSage's file agent) has no memory: refused, never ignored
    with pytest.raises(UserError, match=r"and the memory wrapper is not played around harness rlm here"):
        harness_settings(get_harness("rlm"), {"memory_bank": str(bank)})  # play() alone has none
