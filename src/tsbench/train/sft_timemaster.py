"""`tsbench sft-baseline --format timemaster-traces`: TimeMaster's warm start (§3.4, Appendix I), SFT on
`<think>...</think><class>...</class>` traces before GRPO.

Where the traces come from (`--data`, any mix):
- JSONL files, one trace a line: {"prompt": user text, "response": the trace, "image": a PNG path
  (relative to the file) or null, "system": optional, "id": optional};
- eval run dirs (`results/<run>`, a teacher model under single-pass-image or single-pass-text): each
  finished row whose score reaches `min_score` (the paper keeps only traces whose class is right) and
  whose final message is a trace; its prompt is rebuilt from the family's row exactly as the harness
  built it (system prompt, question, plot).
A reply that is not `<think>x</think><class>y</class>` (an optional `<extension>` may follow) is
skipped and counted. Examples reach TRL's SFTTrainer in its documented prompt-completion form, with an
"images" column for a vision-language model (TRL's vision collator turns them into pixels; the loss
is on the completion only).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tsbench.core import json_input
from tsbench.core.errors import UserError

# A trace is r"^\s*<think>.+?</think>\s*<class>.+?</class>(\s*<extension>.*?</extension>)?\s*$" (re.S | re.I);
# that regex backtracks over every (</think>, </class>) pair, quadratic on a teacher's reply of many tags,
# so `is_trace` decides the same in one pass: the first </think><class> leaves the most room after it.
TRACE = re.compile(r"^\s*<think>.+?</think>\s*<class>.+?</class>(\s*<extension>.*?</extension>)?\s*$", re.S | re.I)
_OPEN_THINK = re.compile(r"\s*+<think>", re.I)
_THINK_CLASS = re.compile(r"</think>\s*+<class>", re.I)
_CLASS_EXTENSION = re.compile(r"</class>\s*+<extension>", re.I)
_CLOSE_CLASS = re.compile(r"</class>", re.I)
_CLOSE_EXTENSION = re.compile(r"</extension>", re.I)


@dataclass
class Trace:
    row_id: str
    system: str | None
    prompt: str
    response: str
    images: list[bytes] = field(default_factory=list)  # PNG bytes
    source: str = ""


def is_trace(text: str) -> bool:
    """`TRACE.match(text)`, in linear time."""
    text = text or ""
    opened = _OPEN_THINK.match(text)
    pair = _THINK_CLASS.search(text, opened.end() + 1) if opened else None  # the think text is not empty
    if pair is None:
        return False
    end = len(text.rstrip())
    if _CLOSE_CLASS.fullmatch(text, max(0, end - 8), end) and end - 8 > pair.end():
        return True
    if not _CLOSE_EXTENSION.fullmatch(text, max(0, end - 12), end):
        return False
    extension = _CLASS_EXTENSION.search(text, pair.end() + 1)  # the class text is not empty
    return extension is not None and extension.end() <= end - 12


def traces_from_jsonl(path: Path, skipped: Counter) -> list[Trace]:
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json_input.loads(line)  # nested too deeply: a ValueError too
            prompt, response = str(item["prompt"]), str(item["response"])
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{path}:{number}: not a trace line (needs JSON with prompt and response)") from None
        if not is_trace(response):
            skipped["not_a_trace"] += 1
            continue
        images = []
        if item.get("image"):
            image = (path.parent / item["image"]).resolve()
            if not image.is_file():
                raise UserError(f"{path}:{number}: image {item['image']} not found")
            images = [image.read_bytes()]
        found.append(
            Trace(str(item.get("id", f"{path.name}:{number}")), item.get("system"), prompt, response, images, str(path))
        )
    return found


def traces_from_run(run_dir: Path, min_score: float, skipped: Counter) -> list[Trace]:
    """A teacher's single-pass eval rows, their prompts rebuilt from the family's rows."""
    from tsbench import results
    from tsbench.harness.prompts import SINGLE_PASS_SYSTEM
    from tsbench.harness.single_pass import image_user_message
    from tsbench.models.base import Message
    from tsbench.tasks import get_taskset
    from tsbench.tasks.base import SampleRef

    run = results.load_run(run_dir)
    harness = str(run.get("harness"))
    if harness not in ("single-pass-image", "single-pass-text"):
        raise UserError(f"{run_dir}: a {harness} run; timemaster-traces reads single-pass-image/-text eval runs")
    family = get_taskset(run["family"])
    config = run.get("config", {})
    files = family.resolve(
        list(config.get("data") or []),
        seed=int(config.get("seed") or 0),
        split=str(config.get("split") or "test"),
        root=config.get("root"),
        filters={},
    )
    paths = dict(zip(*(lambda rows: (rows["id"].astype(str), rows["path"]))(family.index(files, {}))))
    found = []
    for record in results.load_samples(run_dir).to_dict("records"):
        score = record.get("score")
        if isinstance(record.get("error_type"), str) or score is None or not score >= min_score:
            skipped["below_min_score_or_error"] += 1
            continue
        response = str(record.get("final_message") or "")
        if not is_trace(response):
            skipped["not_a_trace"] += 1
            continue
        if str(record["id"]) not in paths:
            skipped["row_not_in_data"] += 1
            continue
        task = family.load(SampleRef(family.name, str(paths[str(record["id"])]), str(record["id"]))).task
        if harness == "single-pass-image":
            user, _ = image_user_message(task)
        else:
            from tsbench.harness.prompts import single_pass_text_prompt

            budget = int(config.get("text_budget_chars") or 4000)
            text, _ = single_pass_text_prompt(task.question, task.channel_names, task.values, budget)
            user = Message("user", text)
        found.append(
            Trace(str(record["id"]), SINGLE_PASS_SYSTEM, user.content, response, list(user.images), str(run_dir))
        )
    return found


def load_traces(data: list[str], min_score: float) -> tuple[list[Trace], dict[str, Any]]:
    if not data:
        raise UserError("--format timemaster-traces needs --data: trace JSONL files or teacher eval run dirs")
    skipped: Counter = Counter()
    traces: list[Trace] = []
    for item in map(Path, data):
        if item.is_file() and item.suffix == ".jsonl":
            traces += traces_from_jsonl(item, skipped)
        elif item.is_dir():
            traces += traces_from_run(item, min_score, skipped)
        else:
            raise UserError(f"--data {item}: neither a .jsonl trace file nor an eval run dir")
    if not traces:
        raise UserError(f"no <think>/<class> traces in {', '.join(data)} (skipped: {dict(skipped)})")
    with_images = {bool(t.images) for t in traces}
    if len(with_images) > 1:
        raise UserError("the traces mix rows with and without images; train them as two runs")
    return traces, {"kept": len(traces), "skipped": dict(skipped)}


def trl_rows(traces: list[Trace]) -> list[dict[str, Any]]:
    """TRL's conversational prompt-completion rows (+ "images" when the traces have them)."""
    from tsbench.models.local_vlm import pil_images

    rows = []
    for t in traces:
        prompt = ([{"role": "system", "content": t.system}] if t.system else []) + [
            {"role": "user", "content": t.prompt}
        ]
        row = {"prompt": prompt, "completion": [{"role": "assistant", "content": t.response}]}
        if t.images:
            row["images"] = pil_images(t.images)
        rows.append(row)
    return rows


class TraceFormat:
    """timemaster-traces: a language or vision-language model (LoRA or full) on <think>/<class> traces."""

    def __init__(self, cfg: Any):
        from tsbench.train.sft_config import checked

        self.cfg = cfg = checked(cfg)
        self.traces, self.selection = load_traces(cfg.data, cfg.min_score)
        if cfg.train_rows is not None:
            self.traces = self.traces[: cfg.train_rows]

    def prepare(self, out: Path, emit: Any) -> Any:
        import torch
        from datasets import Dataset

        from tsbench.train.policy import load_policy, name_base
        from tsbench.train.sft_format import Prepared

        cfg, traces = self.cfg, self.traces
        on_gpu = torch.cuda.is_available()
        emit("load_start", model=cfg.policy.model)
        policy = load_policy(cfg.policy, out, on_gpu=on_gpu)
        if traces[0].images and policy.processor is None:
            raise UserError(
                f"the traces show images, but {cfg.policy.model} is a text-only model: use a vision-language one"
            )

        def save(trainer: Any, target: Path) -> None:
            trainer.save_model(str(target))
            if policy.processor is not None:
                policy.processor.save_pretrained(str(target))
            name_base(target, policy.base_record)

        return Prepared(
            model=policy.model,
            train=Dataset.from_list(trl_rows(traces)),
            val=None,
            save=save,
            data={
                "format": "timemaster-traces",
                "selection": self.selection,
                "sources": sorted({t.source for t in traces}),
            },
            model_record={
                "spec": cfg.policy.model,
                "base_model_name_or_path": policy.base_record,
                "lora": cfg.policy.lora,
            },
            eval_hint={
                "model": f"local/{out}",
                "harness": "single-pass-image" if traces[0].images else "single-pass-text",
            },
            # TRL's prompt-completion rows (its vision collator makes the pixels): the loss on the completion only
            args={"max_length": cfg.max_seq_len, "completion_only_loss": True, "lr_scheduler_type": "cosine"},
            processing_class=policy.processing_class,
            peft_config=policy.peft_config,
            on_gpu=on_gpu,
        )
