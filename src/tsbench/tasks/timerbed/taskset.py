"""TimerBed as a TaskFamily (TimeMaster Table 1, Appendices E, G.1, H): one row per series, the task's
classes as options, scored 1 for the gold class; the board reports accuracy (the paper's metric) and
macro-F1 per task.

`tsbench generate --family timerbed --path DIR` reads the public releases under DIR in their own formats
(readers.py), names classes as the paper does (labels.py), writes the paper's prompt (prompts.py) and
keeps values raw. A row's image is the paper's plot (plots.py), put on the task as `EpisodeTask.image`
so image harnesses show it. Optional `labels.json` beside a file (or in DIR) renames class codes of any
other archive dataset: {"<Task>": {"<raw>": "<name>"}} or {"<raw>": "<name>"}.
An answer is read as TimeMaster's public reward code reads it (core/class_tags.py): the first
`<class>...</class>` span, anywhere in the reply, whose text is one of the classes ignoring case and
surrounding whitespace (`Desktop.` is none). One addition, for harnesses whose final message is JSON
(TimeClaw's file agent and tools): a reply with no `<class>` span at all is read from its JSON
"answer", and the row says so (`parsed["from"] = "json"`); the public code scores such a reply 0.
Anything else scores 0 and is recorded as invalid.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tsbench.core.answers import last_json_object
from tsbench.core.class_tags import first_named, named_option, tag_spans
from tsbench.core.errors import UserError
from tsbench.core.user_files import UserFolder
from tsbench.tasks.base import Column, Sample, SampleRef, Scored
from tsbench.tasks.recordings.family import RecordingFamily, write_split
from tsbench.tasks.recordings.rows import Row
from tsbench.tasks.recordings.sources import refuse_unknown, source_path, stable_id
from tsbench.tasks.timerbed.labels import TASKS, class_name
from tsbench.tasks.timerbed.plots import render_png, save_plot
from tsbench.tasks.timerbed.prompts import question_text
from tsbench.tasks.timerbed.readers import WINDOW, Release, Series, find_releases, where_published

REGIME = "coarse"
SPLITS = ("test", "train")
COLUMNS = tuple(Column(s.code, s.short, "acc", s.group, s.classes) for s in TASKS.values())


def chosen_class(message: Any, options: list[str]) -> tuple[str | None, str]:
    """(the option a final message names, where it was read: "class" or "json"); None when it names none."""
    if not isinstance(message, str):
        return None, "class"
    if next(tag_spans(message), None) is not None:
        return first_named(message, lambda text: named_option(text, options)), "class"
    found, _ = last_json_object(message)
    answer = found.get("answer") if found else None
    return (named_option(answer, options), "json") if isinstance(answer, str) else (None, "class")


def short_records_note(split: str, short: dict[str, list[str]]) -> str:
    """The line `tsbench generate` prints about records that gave no row."""
    listed = "; ".join(
        f"{task.upper()} {len(records)} ({', '.join(records[:5])}{', ...' if len(records) > 5 else ''})"
        for task, records in short.items()
    )
    return f"{split}: WFDB records under {WINDOW} samples (one window) gave no row: {listed}"


def _renames(files: UserFolder, folder: Path, root: Path, dataset: str) -> dict[str, str]:
    for place in (folder / "labels.json", root / "labels.json"):
        if files.is_file(place):
            data = files.read_json(place)
            mapping = data.get(dataset, data) if isinstance(data, dict) else {}
            if isinstance(mapping, dict) and all(isinstance(v, str) for v in mapping.values()):
                return {str(k): v for k, v in mapping.items()}
    return {}


class TimerBed(RecordingFamily):
    name = "timerbed"
    dataset = "TimerBed (six real classification tasks)"
    default_root_dir = "data/timerbed"
    default_harness = "single-pass-image"
    boards = ("timerbed",)  # TimeMaster Tables 1 and 3 (leaderboard/timerbed.py)
    answer_tags = True  # the questions end with TimeMaster's instruction (H.2) and `score` reads its tags
    OPTIONS = ("path", "seed", "split", "rows_per_cell", "categories")

    # -- scoring -----------------------------------------------------------------------------------
    def score(self, category: str, gold: Any, message: str) -> Scored:
        chosen, source = chosen_class(message, list(gold["options"]))
        correct = float(chosen is not None and chosen == gold["answer"])
        return Scored(
            score=correct,
            valid=chosen is not None,
            parsed={"answer": chosen or ""} | ({"from": "json"} if source == "json" else {}),
            error=None if chosen is not None else "no <class> span names one of the classes",
            metrics={"correct": correct},
        )

    def columns(self) -> list[Column]:
        return list(COLUMNS)

    def answer_class(self, category: str, gold: Any, text: str) -> str | None:
        """The option a <class> span's text names, ignoring case and surrounding whitespace (TimeMaster's
        public reward; the same test `score` applies)."""
        return named_option(text, list(gold["options"]))

    def gold_class(self, category: str, gold: Any) -> str:
        return gold["answer"]

    def sft_target(self, category: str, gold: Any) -> str:
        """A reply in TimeMaster's format naming the gold class (real warm-start traces come from files)."""
        return f"<think>The plot's pattern matches {gold['answer']}.</think><class>{gold['answer']}</class>"

    # -- the row as a harness sees it ----------------------------------------------------------------
    def load(self, ref: SampleRef) -> Sample:
        sample = super().load(ref)
        task = sample.task
        if task.values is not None and task.values.size:
            task.image = render_png(task.category, task.channel_names, task.values)
        return sample

    def plot(self, files: list[Path], row_id: str, out: Path, predicted: Any = None) -> Path | None:
        rows = self.index(list(files), {})
        hit = rows[rows["id"] == row_id]
        if hit.empty:
            return None
        sample = RecordingFamily.load(self, SampleRef(self.name, str(hit.iloc[0]["path"]), row_id))
        return save_plot(sample.task.category, sample.task.channel_names, sample.task.values, out)

    # -- data ----------------------------------------------------------------------------------------
    def generate(self, options: dict, out: Path, progress=None) -> tuple[Path, list[dict]]:
        """`options`: path (required), seed, split (test, train or all), rows_per_cell (at most this many
        rows per task, a seeded draw), categories (task names, lower case)."""
        refuse_unknown(options, self.OPTIONS, self.name)
        split = options.get("split") or "test"
        splits = list(SPLITS) if split == "all" else [split]
        if any(s not in SPLITS for s in splits):
            raise UserError(f"--split must be test, train or all for --family {self.name} (got {split})")
        limit = options.get("rows_per_cell")
        if limit is not None and int(limit) < 1:
            raise UserError("--rows-per-cell must be at least 1")
        path = source_path(options, self.name, where_published())
        seed = int(options.get("seed", 42))
        wanted = {c.lower() for c in options.get("categories") or []}
        folder = UserFolder(path, self.name)
        releases = [r for r in find_releases(folder) if not wanted or r.category in wanted]
        if not releases:
            what = "TimerBed release files" + (f" of {sorted(wanted)}" if wanted else "")
            raise UserError(f"no {what} under {path}; --family {self.name} reads {where_published()}")
        for release in releases:
            release.check()  # every file of every split, before a row is written
        manifest, lines = None, []
        for name in splits:
            chosen = [r for r in releases if r.kind != "archive" or name in r.files]
            if not chosen:
                raise UserError(f"no {name} split files under {path}; --family {self.name} reads {where_published()}")
            short: dict[str, list[str]] = {}  # filled while the rows are read; the manifest is written after
            config = {
                "split": name,
                "rows_per_cell": limit,
                "tasks": [r.category for r in chosen],
                "releases": {r.category: f"{r.dataset} ({r.kind})" for r in chosen},
                "path": str(path),
                f"records_under_{WINDOW}_samples": short,
            }
            rows = self._rows(chosen, folder.root, name, seed, None if limit is None else int(limit), short)
            manifest, written = write_split(
                self.name, self.dataset, rows, out, seed=seed, split=name, config=config, sources=folder.hashes,
                progress=progress,
            )  # fmt: skip
            if short:
                written[-1]["note"] = short_records_note(name, short)
            lines += written
        return manifest, lines

    def _rows(
        self, releases: list[Release], root: Path, split: str, seed: int, limit: int | None, short: dict
    ) -> Iterator[Row]:
        """One task at a time (a TimerBed test set can hold 40k series); `short` gets, per task, the
        WFDB records too short for one window."""
        base = root if root.is_dir() else root.parent
        for release in releases:
            series = list(release.read(split))
            if release.short_records.get(split):
                short[release.category] = list(release.short_records[split])
            if not series:
                continue
            spec = TASKS.get(release.category)
            folder = release.files[next(iter(release.files))][0].parent
            renames = _renames(release.folder, folder, base, release.dataset)
            classes = self._classes(release, series, renames)
            picked = np.arange(len(series))
            if limit is not None and limit < len(series):
                draw = np.random.default_rng([seed, int(stable_id(release.category), 16)])
                picked = np.sort(draw.choice(len(series), size=limit, replace=False))
            for i in picked:
                item = series[int(i)]
                label = class_name(spec, item.label, renames)
                if label not in classes:
                    raise UserError(
                        f"{release.dataset} ({item.source}): class code {item.label!r} is not one of "
                        f"{release.category.upper()}'s {sorted(spec.codes) if spec else classes}; "
                        f"--family {self.name} reads {where_published()}"
                    )
                yield self._row(release, item, int(i), split, seed, label, classes, spec, base)

    @staticmethod
    def _classes(release: Release, series: list[Series], renames: dict[str, str]) -> list[str]:
        spec = TASKS.get(release.category)
        if spec is not None:
            return list(spec.classes)
        return sorted({class_name(None, s.label, renames) for s in series})

    def _row(self, release, item: Series, i: int, split, seed, label, classes, spec, base: Path) -> Row:
        values = item.values
        default = spec.channels if spec else ()
        names = list(default) if len(default) == values.shape[0] else [f"dim_{c}" for c in range(values.shape[0])]
        source = {"release": release.dataset, **item.source}
        return Row(
            id=f"timerbed-{release.category}-{split}-{i:06d}",
            split=split,
            category=release.category,
            regime=REGIME,
            channel_names=names,
            question=question_text(release.category, names, values.shape[1], classes),
            options=list(classes),
            gold={"answer": label, "options": list(classes)},
            seed=seed,
            values=values,
            meta={},
            source=source,
        )
