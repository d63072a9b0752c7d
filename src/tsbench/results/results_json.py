"""results.json in lm-eval's layout, so whatever reads lm-eval's results file reads ours.

lm-eval's keys, as lm_eval 0.4 writes them (`lm_eval.utils.make_table` reads them; tests/test_results_json.py
checks with it when lm_eval is installed): `results[task]["<metric>,none"]` and
`results[task]["<metric>_stderr,none"]` (its `metric,filter` keys, "N/A" where there is no standard
error), `alias` and `sample_len`; tasks are `<family>/<category>`, and `<family>` is also their group
(`groups`, `group_subtasks`); `versions`, `n-shot`, `higher_is_better`, `n-samples`, `configs`,
`config`, `git_hash` and `date` as lm-eval fills them. tsbench's own numbers sit under keys of their
own: `summary` (per category and overall, with the valid / invalid / cut / error counts), `tasks`
(n, errors and the paper's metric per task), the run's identity and provenance.
"""

from __future__ import annotations

import time
from typing import Any

FILTER = "none"  # lm-eval's name for "no filter": tsbench scores the reply as it came
LEGACY_SUMMARY = "results"  # files written before this layout held the summary there
# The group's number lm-eval can recompute from its subtasks (lm_eval.api.metrics.aggregate_subtask_metrics):
# every subtask carries `score` and its stderr, and the group's score is their mean weighted by sample_len
# (the scored rows). A benchmark's own aggregate (CiK's capped, task-weighted RCRPS) is not a mean of means
# and is reported beside it, never declared as lm-eval's aggregate.
GROUP_AGGREGATE = {"metric": "score", "aggregation": "mean", "weight_by_size": True, "filter_list": [FILTER]}
_NOT_METRICS = {"n", "errors", "primary", "metric", "protocol", "lower_is_better"}


def metric_names(task: dict[str, Any]) -> list[str]:
    """The metrics of one `tasks` entry, primary first: its mean score, accuracy, macro-F1, a column's
    own mean (IoU, RCRPS, ...). A multiple-choice task keeps `score` beside `accuracy` (the same number):
    its group's metric is `score`, and lm-eval aggregates a group from the subtasks that carry it."""
    names = [
        k
        for k, v in task.items()
        if k not in _NOT_METRICS and not k.endswith(("_stderr", "_n")) and (v is None or isinstance(v, (int, float)))
    ]
    primary = task.get("primary")
    return sorted(names, key=lambda k: (k != primary, names.index(k)))


def lm_eval_entry(alias: str, task: dict[str, Any]) -> dict[str, Any]:
    """One `results[task]` entry: every metric and its standard error under lm-eval's keys."""
    entry: dict[str, Any] = {"alias": alias}
    for name in metric_names(task):
        stderr = task.get(f"{name}_stderr", task.get("score_stderr") if name == "accuracy" else None)
        entry[f"{name},{FILTER}"] = task[name]
        entry[f"{name}_stderr,{FILTER}"] = "N/A" if stderr is None else stderr
    entry["sample_len"] = task.get("n", 0)
    return entry


def lm_eval_layout(family: str, tasks: dict[str, dict], summary: dict, config: dict, version: str) -> dict:
    """lm-eval's top-level keys from the `tasks` block (tsbench's task_results) and the summary."""
    rows = {b["category"]: b["rows"] for b in summary.get("categories", [])}
    rows[family] = summary.get("overall", {}).get("rows", 0)
    results = {name: lm_eval_entry(name.split("/", 1)[-1], task) for name, task in tasks.items()}
    higher = {
        name: {m: not task.get("lower_is_better", False) or m != task.get("primary") for m in metric_names(task)}
        for name, task in tasks.items()
    }
    subtasks = [name for name in tasks if name != family]
    configs = {
        name: {
            "task": name,
            "tag": family,
            "output_type": "generate_until",
            "metric_list": [{"metric": m, "higher_is_better": hib} for m, hib in higher[name].items()],
        }
        for name in tasks
    }
    if family in configs:  # as a group YAML declares it: the mean score, weighted by each subtask's rows
        configs[family]["aggregate_metric_list"] = [GROUP_AGGREGATE]
    return {
        "results": results,
        "groups": {family: results[family]} if family in results else {},
        "group_subtasks": {family: subtasks, **{name: [] for name in subtasks}},
        "configs": configs,
        "versions": dict.fromkeys(tasks, version),
        "n-shot": dict.fromkeys(tasks, 0),
        "higher_is_better": higher,
        "n-samples": {
            name: {"original": rows.get(name.split("/", 1)[-1], 0), "effective": task.get("n", 0)}
            for name, task in tasks.items()
        },
        "config": config,
    }


def build(info: dict[str, Any], summary: dict, tasks: dict[str, dict], **extra: Any) -> dict[str, Any]:
    """The whole file: lm-eval's keys, then tsbench's (run identity, summary, tasks, provenance)."""
    family = info.get("family") or "anomalyxl"
    package_versions = info.get("versions") or {}
    config = info.get("config") or {}
    out = lm_eval_layout(family, tasks, summary, config, str(package_versions.get("tsbench", "")))
    out.update(git_hash=(info.get("git_commit") or "")[:7] or None, date=time.time())
    out.update(
        {
            "run_name": info.get("run_name"),
            "family": family,
            "model": info.get("model"),
            "harness": info.get("harness"),
            "reference": info.get("reference"),
            "complete": info.get("complete"),
            "dataset": info.get("dataset"),
            "summary": summary,
            "tasks": tasks,
            "package_versions": package_versions,
            "git_commit": info.get("git_commit"),
            **extra,
        }
    )
    return out


def summary_of(results: dict | None) -> dict | None:
    """The per-category and overall summary of a results.json (this layout's, or an older file's)."""
    if not isinstance(results, dict):
        return None
    for key in ("summary", LEGACY_SUMMARY):
        block = results.get(key)
        if isinstance(block, dict) and isinstance(block.get("overall"), dict):
            return block
    return None


def package_versions(results: dict) -> dict:
    """The package versions the run recorded (`versions` in files written before this layout)."""
    found = results.get("package_versions")
    if isinstance(found, dict):
        return found
    legacy = results.get("versions")
    return legacy if isinstance(legacy, dict) and "tsbench" in legacy else {}
