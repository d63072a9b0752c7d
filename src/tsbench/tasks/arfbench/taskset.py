"""ARFBench as a TaskFamily (paper §4.2, Table 2): Tier 2 by default, 306 questions in the release.

Scoring is the MCQ rule of AnomalyXL (Appendix E.7): the extracted option must equal the gold
option text exactly (1 or 0). The leaderboard shows accuracy and macro-F1, F1 over ARFBench's
answer classes (classes.py); `parsed["answer"]` and `gold["answer"]` carry those classes.
Options are shown in an order shuffled by the seed, as ARFBench's own evaluation shuffles them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.core.answers import extract_choice
from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.tasks.arfbench import classes, reader
from tsbench.tasks.base import Column, Scored
from tsbench.tasks.recordings.family import RecordingFamily, write_split
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sources import refuse_unknown, source_path, stable_id

REGIME = "coarse"
MAX_LENGTH = 131_072
SHORT = {
    "anomaly_identification": "Iden.",
    "anomaly_start": "Start",
    "anomaly_end": "End",
    "anomaly_magnitude": "Magn.",
    "anomaly_categorization": "Categ.",
    "anomaly_presence": "Pres.",
    "anomaly_indicator": "Ind.",
    "anomaly_correlation": "Corr.",
}
COLUMNS = tuple(
    Column(
        reader.category_id(name),
        SHORT[reader.category_id(name)],
        "acc",
        f"ARFBench {tier}",
        classes.CLASSES.get(reader.category_id(name), ()),
    )
    for tier in ("Tier 2", "Tier 1", "Tier 3")
    for name in reader.TIERS[tier]
)
DEFAULT_CATEGORIES = tuple(reader.category_id(c) for c in reader.TIERS["Tier 2"])
ALL_CATEGORIES = tuple(c.category for c in COLUMNS)


def question_text(question: str, options: list[str], series: reader.Series) -> str:
    axis = (
        f"Sample i is at {series.start} + i x {series.interval_s} s (UTC)."
        if series.start
        else f"Samples are {series.interval_s} s apart."
    )
    listed = "\n".join(f"- {o}" for o in options)
    return (
        f"{question.strip()}\n\nThe series ({', '.join(series.names)}) have {series.values.shape[1]} samples. {axis}\n"
        f"Options:\n{listed}\n"
        f'Answer with the JSON object {{"answer": "<one option, exactly as written>"}}.'
    )


class ARFBench(RecordingFamily):
    name = "arfbench"
    dataset = "ARFBench (Datadog observability telemetry)"
    default_root_dir = "data/arfbench"
    strata = ()
    OPTIONS = ("path", "seed", "split", "categories")

    def score(self, category: str, gold: Any, message: str) -> Scored:
        chosen = extract_choice(message)
        options = list(gold["options"])
        on_list = chosen in options
        predicted_class = classes.answer_class(category, chosen, options) if on_list else None
        correct = float(chosen == gold["option"])
        return Scored(
            score=correct,
            valid=on_list,
            parsed={"answer": predicted_class or "", "option": chosen},
            error=None if on_list else "the answer is not one of the options",
            metrics={"correct": correct},
        )

    def columns(self) -> list[Column]:
        return list(COLUMNS)

    def answer_class(self, category: str, gold: Any, text: str) -> str | None:
        chosen = extract_choice(text)
        return classes.answer_class(category, chosen, gold["options"]) if chosen in gold["options"] else None

    def gold_class(self, category: str, gold: Any) -> str:
        return gold["answer"]

    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required), seed (option order), categories (default: the Tier 2 five, or "all")."""
        refuse_unknown(options, self.OPTIONS, self.name)
        if (options.get("split") or "test") != "test":
            raise UserError(f"--family {self.name} has one split: test (got --split {options['split']})")
        wanted = list(options.get("categories") or DEFAULT_CATEGORIES)
        if wanted == ["all"]:
            wanted = list(ALL_CATEGORIES)
        unknown = sorted(set(wanted) - set(ALL_CATEGORIES))
        if unknown:
            raise UserError(f"unknown categories {unknown}; choose from {', '.join(ALL_CATEGORIES)} or all")
        path = source_path(options, self.name)
        seed = int(options.get("seed", 42))
        folder = UserFolder(path, self.name)
        csv = reader.find_questions(folder)
        data = reader.data_dir(folder)
        table = reader.read_questions(folder, csv)
        table = table[[reader.category_id(c) in wanted for c in table["task_category"]]]
        # Every question's series files are chosen and checked (names, footers, budget) before a row is written.
        questions = enumerate(table.itertuples(index=False))
        planned = [(number, rec, plan) for number, rec in questions if (plan := self._plan(rec, folder, data, csv))]
        config = {"categories": wanted, "max_length": MAX_LENGTH, "path": str(path)}
        config["skipped_questions"] = len(table) - len(planned)
        if not planned:
            raise UserError(f"no ARFBench question of {', '.join(wanted)} has its series under {data}")

        def rows():
            for number, rec, plan in planned:
                made = self._row(rec, number, folder, plan, seed)
                if made is None:
                    config["skipped_questions"] += 1  # lands in the manifest, written after the rows
                    continue
                yield made

        manifest, lines = write_split(
            self.name,
            self.dataset,
            rows(),
            out,
            seed=seed,
            split="test",
            config=config,
            sources=folder.hashes,  # the question file and every series file read for a row
            progress=progress,
            total=len(planned),
        )
        if not lines[0]["rows"]:
            (manifest.parent / lines[0]["file"]).unlink(missing_ok=True)
            raise UserError(f"no ARFBench question of {', '.join(wanted)} has its series under {data}")
        return manifest, lines

    @staticmethod
    def _plan(rec, folder: UserFolder, data: Path, csv: Path) -> reader.Plan | None:
        """Where a question's series are read from; None for a question without its answer among the
        options, without query groups or without released series (skipped and counted)."""
        groups = [g.strip() for g in str(rec.query_group).split(",") if g.strip()]
        if str(rec.correct_answer).strip() not in reader.parse_options(rec.options_str) or not groups:
            return None
        return reader.plan_series(folder, data, groups, MAX_LENGTH, csv)

    def _row(self, rec, number: int, folder: UserFolder, plan: reader.Plan, seed: int) -> Row | None:
        options = reader.parse_options(rec.options_str)
        correct = str(rec.correct_answer).strip()
        series = reader.read_series(folder, plan)
        if series is None:
            return None
        category = reader.category_id(rec.task_category)
        key = stable_id(self.name, number, rec.query_group, rec.question)
        digest = hashlib.blake2b(f"{seed}|{key}".encode(), digest_size=8).digest()
        shuffled = [
            options[i] for i in np.random.default_rng(int.from_bytes(digest, "little")).permutation(len(options))
        ]
        gold = {
            "answer": classes.answer_class(category, correct, options) or correct,
            "option": correct,
            "options": options,
        }
        row = Row(
            id=f"arfbench-{key}",
            split="test",
            category=category,
            regime=REGIME,
            channel_names=series.names,
            question=question_text(str(rec.question), shuffled, series),
            options=shuffled,
            gold=gold,
            seed=seed,
            values=series.values,
            meta={"interval_s": series.interval_s, "start": series.start},
            source={"query_group": str(rec.query_group), "question_number": number, "interval_s": series.interval_s},
        )
        return row
