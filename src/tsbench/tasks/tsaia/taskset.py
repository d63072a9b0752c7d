"""TSAIA as a TaskFamily (TimeClaw paper §4.3, Fig. 4, Table 9): financial time-series analysis.

`tsbench convert-tsaia --path RELEASE --out DIR` turns the release into parquet (its pickles are
loaded in the jail only); `tsbench generate --family tsaia --path DIR` reads that (reader.py) and
writes `train.parquet` and `test.parquet` as TimeClaw's code splits them (half of each question type
to train, at least one, split seed 2026; timeclaw_protocol.py). The default selection is the paper's
150 finance multiple-choice items (Table 9); `--categories analysis`, `all` or question types choose
others. A row's category is its question type, its series the item's executor variables.

Scoring is TSAIA's own (official.py): a multiple-choice answer is right when it is the letter itself
(`predictions == answer`); an analysis answer goes through the official evaluator of its question
type, and the row's score is its status (the success rate is the mean), the type's sub-metric in the
row's metrics. A reply without a JSON answer scores 0, as a missing `predictions` does there.
TimeClaw's own letter parser is shown beside (`timeclaw_accuracy`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.core.answers import last_json_object
from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.tasks.base import Column, Scored
from tsbench.tasks.recordings.family import RecordingFamily, write_train_test
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sources import refuse_unknown, source_path
from tsbench.tasks.timeclaw_protocol import mc_letter, split_train_test
from tsbench.tasks.tsaia import official, reader
from tsbench.tasks.tsaia.tagged import decode

OPTIONS = ("path", "seed", "split", "categories")
MC_TYPES = ("VaR-confidence_level", "SharpeRatio", "MarketAB-alpha", "MarketAB-beta")  # Table 9
SELECTIONS = {"mc": "multiple-choice items", "analysis": "analysis items", "all": "every item"}


def question_text(item: reader.Item) -> str:
    names = ", ".join(item.channel_names)
    head = f"{item.prompt}\n\n{item.data_text.strip()}\n\nThe series ({names}) are in the workspace."
    if item.kind == "mc":
        listed = "\n".join(f"{reader.LETTERS[i]}) {o}" for i, o in enumerate(item.options))
        return f'{head}\nOptions:\n{listed}\nAnswer with the JSON object {{"answer": "<the option letter>"}}.'
    requirement = f"\n{item.output_requirement.strip()}" if item.output_requirement.strip() else ""
    return f'{head}{requirement}\nAnswer with the JSON object {{"answer": <your result, numbers as JSON>}}.'


def memory_descriptor(item: reader.Item) -> str:
    """Appendix C's c_tau for TSAIA: question type, prompt, the data description, then the output
    constraint (analysis) or the option list (MC)."""
    last = " ".join(item.options) if item.kind == "mc" else _constraint_text(item)
    return "\n".join(f for f in (item.question_type, item.prompt, item.data_text.strip(), last) if f)[:8000]


def _constraint_text(item: reader.Item) -> str:
    constraint = decode(item.constraint) if item.constraint is not None else None
    return json.dumps(constraint, default=str, sort_keys=True) if constraint else ""


def to_row(item: reader.Item, split: str, seed: int) -> Row:
    if item.kind == "mc":
        n = len(item.options)
        gold = {"answer": item.answer, "kind": "mc", "n_options": n, "timeclaw_options": n}
    else:
        truth = decode(item.truth)
        gold = {
            "answer": "analysis",
            "kind": "analysis",
            "truth": item.truth,
            "context": item.context,
            "constraint": item.constraint,
            "problematic": official.is_problematic(item.question_type, truth),
        }
    return Row(
        id=item.key,
        split=split,
        category=item.question_type,
        regime=item.kind,
        channel_names=item.channel_names,
        question=question_text(item),
        options=list(reader.LETTERS[: len(item.options)]),
        gold=gold,
        seed=seed,
        values=item.values.astype(np.float32),  # NaN pads channels shorter than the longest
        meta={
            "question_type": item.question_type,
            "memory_descriptor": memory_descriptor(item),
            "variables": item.variables,
        },
        source={"kind": item.kind},
    )


def score_mc(gold: dict, message: str) -> Scored:
    answer, why = last_json_object(message or "")
    timeclaw = mc_letter(message or "", int(gold.get("timeclaw_options", 4)))
    metrics = {"timeclaw_accuracy": float(timeclaw == gold["answer"])}
    if answer is None or "answer" not in answer:
        return Scored(0.0, False, None, why or 'no "answer" in the JSON object', metrics)
    correct = float(official.mc_correct(answer["answer"], gold["answer"]))
    return Scored(correct, True, {"answer": answer["answer"]}, None, metrics)


def score_analysis(category: str, gold: dict, message: str) -> Scored:
    answer, why = last_json_object(message or "")
    if answer is None or "answer" not in answer:
        return Scored(0.0, False, None, why or 'no "answer" in the JSON object', {"status": 0.0})
    if gold.get("problematic"):
        note = "the official run skips this question (its ground truth has NaN) and counts it unsolved"
        return Scored(0.0, True, {"answer": answer["answer"]}, note, {"status": 0.0})
    truth, context, constraint = (decode(gold[k]) for k in ("truth", "context", "constraint"))
    result = official.evaluate(category, answer["answer"], truth, context or {}, constraint or {})
    metric = official.EVALUATORS[official.family_of(category)][2]
    metrics: dict[str, float | None] = {"status": float(result["status"])}
    if result["status"] == 1 and isinstance(result.get(metric), (int, float)):
        metrics[metric] = float(result[metric])  # the official sub-metric, over solved items
    if isinstance(result.get("result"), dict):
        metrics.update({k.lower().replace(" ", "_"): v for k, v in result["result"].items()})
    error = result.get("message") if result.get("error") else None
    return Scored(float(result["status"]), not error, {"answer": answer["answer"]}, error, metrics)


def select(items: list[reader.Item], categories: list[str] | None) -> list[reader.Item]:
    wanted = categories or ["mc"]
    if len(wanted) == 1 and wanted[0] in SELECTIONS:
        kind = wanted[0]
        return [i for i in items if kind == "all" or i.kind == kind]
    known = {i.question_type for i in items}
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise UserError(f"no TSAIA question type {unknown[0]!r} (mc, analysis, all or one of {sorted(known)[:6]}...)")
    return [i for i in items if i.question_type in wanted]


class TSAIA(RecordingFamily):
    name = "tsaia"
    dataset = "TSAIA (Melady, financial time-series analysis)"
    default_root_dir = "data/tsaia"

    def score(self, category: str, gold: Any, message: str) -> Scored:
        if gold["kind"] == "mc":
            return score_mc(gold, message)
        return score_analysis(category, gold, message)

    def columns(self) -> list[Column]:
        return [Column(t, t, "acc", "TSAIA MC") for t in MC_TYPES]

    def sft_target(self, category: str, gold: Any) -> str:
        if gold["kind"] == "mc":
            return json.dumps({"answer": gold["answer"]})
        truth = decode(gold["truth"])
        return json.dumps({"answer": truth.tolist() if isinstance(truth, np.ndarray) else truth}, default=str)

    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required: the converter's folder), seed, categories (mc | analysis | all |
        question types; default mc), split (train | test; default both)."""
        refuse_unknown(options, OPTIONS, self.name)
        path = source_path(options, self.name, reader.SOURCE_HINT)
        folder = UserFolder(path, self.name)
        items, skipped = reader.read_items(folder)
        chosen = select(items, options.get("categories"))
        if not chosen:
            raise UserError(f"no TSAIA item of the selection under {path} ({sum(skipped.values())} skipped)")
        train, test = split_train_test(chosen, lambda i: i.question_type)
        config = {
            "path": str(path),
            "selection": options.get("categories") or ["mc"],
            "grouped_by": "question type (TimeClaw)",
            "skipped_items": skipped,
        }
        # the folder lists conversion.json and the tables read
        return write_train_test(
            self, train, test, to_row, out, options=options, folder=folder, config=config, progress=progress
        )
