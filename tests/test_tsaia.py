"""TSAIA: the official evaluators' golden vectors, the pickle converter (pickles loaded in the jail
only) on a release written here in the published layout, and the family on its output."""

from __future__ import annotations

import csv
import json
import math
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tsbench.core.errors import UserError
from tsbench.tasks import get_taskset
from tsbench.tasks.base import SampleRef
from tsbench.tasks.tsaia import official
from tsbench.tasks.tsaia import reader as tsaia_reader
from tsbench.tasks.tsaia.encode import encode
from tsbench.tasks.tsaia.tagged import TagError, decode

GOLDEN = Path(__file__).parent / "golden" / "tsaia"
METRICS = ("mape", "accuracy", "f1", "absolute_diff", "strict_success")


def _same(got, want) -> bool:
    if got is None:
        return False
    if math.isnan(want):
        return math.isnan(got)
    return got == want or abs(got - want) <= 1e-9 * abs(want)


def test_every_official_evaluator_vector_is_reproduced():
    cases = [json.loads(line) for line in (GOLDEN / "evaluators.jsonl").read_text().splitlines()]
    compared, mismatches, families = 0, [], set()
    for case in cases:
        truth, context, constraint = (decode(case[k]) for k in ("truth", "context", "constraint"))
        families.add(official.family_of(case["question_type"]))
        for vector in case["answers"]:
            compared += 1
            want = vector["official"]
            got = official.evaluate(case["question_type"], vector["answer"], truth, context, constraint)
            same = got["status"] == want["status"] and int(got.get("error", 0)) == want["error"]
            same &= all(_same(got.get(k), want[k]) for k in METRICS if k in want)
            same &= all(_same(got.get("result", {}).get(k), v) for k, v in want.get("result", {}).items())
            if not same:
                mismatches.append((case["question_type"], str(vector["answer"])[:60], want, got))
    assert compared > 3500 and families == set(official.EVALUATORS) and mismatches == []


def test_multiple_choice_is_the_letter_itself():
    for vector in json.loads((GOLDEN / "multiple_choice.json").read_text()):
        assert official.mc_correct(vector["answer"], vector["letter"]) == vector["official"], vector


def test_tagged_json_round_trips_and_refuses_what_it_does_not_know():
    frame = pd.DataFrame({"Close": [1.0, 2.0]}, index=pd.date_range("2024-01-01", periods=2).date)
    value = {"VAL": frame, "W": np.array([0.2, 0.8]), 3: (1, "x"), "n": float("nan"), "s": np.array(["a", "bc"])}
    back = decode(json.loads(json.dumps(encode(value))))
    assert back["VAL"]["Close"].tolist() == [1.0, 2.0] and str(back["VAL"].index[0].date()) == "2024-01-01"
    assert back["W"].tolist() == [0.2, 0.8] and back[3] == (1, "x") and math.isnan(back["n"])
    assert back["s"].tolist() == ["a", "bc"]
    for bad in (
        {"$array": {"dtype": "|O", "shape": [1], "data": "AAAAAAAAAAA="}},
        {"$array": {"dtype": "<f8", "shape": [10**9, 10**9], "data": ""}},
        {"$array": {"dtype": "<f8", "shape": [2], "data": "AAAA"}},
        {"$pickle": "x"},
        {"$unsupported": "function"},
    ):
        with pytest.raises(TagError):
            decode(bad)


# ------------------------------------------------------------------------------- a release, here --


class Hostile:
    """A pickle that, loaded, reads a host file (the jail has none of them)."""

    def __init__(self, secret: Path):
        self.secret = secret

    def __reduce__(self):
        return (eval, (f"open({str(self.secret)!r}).read()",))


def _dump(root: Path, name: str, value) -> str:
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / name).write_bytes(pickle.dumps(value))
    return f"data/{name}"


def _prices(rng, n: int, days: int = 30) -> pd.DataFrame:
    index = pd.date_range("2024-01-02", periods=days, freq="B").date
    return pd.DataFrame(50 + np.cumsum(rng.normal(size=(days, n)), 0), index=index, columns=[f"S{i}" for i in range(n)])


def write_release(root: Path, secret: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    mc = []
    for number, qtype in enumerate(
        [t for t in ("VaR-confidence_level", "SharpeRatio", "MarketAB-beta") for _ in range(4)]
    ):
        if qtype.startswith("MarketAB"):
            variables = {"VAL": _prices(rng, 1), "market_VAL": _prices(rng, 1)}
            options, info = ["Option A: Less volatile", "Option B: More volatile"], {"alpha": 0.1, "beta": 1.3}
        else:
            variables = {
                f"{k}_{o}": v for o in "ABC" for k, v in (("VAL", _prices(rng, 3)), ("WEIGHTS", rng.dirichlet([1] * 3)))
            }
            options, info = [f"Option {o}: portfolio {o}" for o in "ABC"], [0.1, 0.2, 0.3]
        mc.append({
            "question_id": str(number), "question_type": qtype, "prompt": f"Which portfolio? ({number})",
            "data_info": "prices are in VAL_A ...", "options": str(options), "answer": "AB"[number % 2],
            "answer_info": _dump(root, f"mc{number}_info.pkl", info),
            "executor_variables": _dump(root, f"mc{number}_vars.pkl", variables),
        })  # fmt: skip
    labels = np.zeros(40, dtype=int)
    labels[10:14] = 1
    nan_labels = labels.astype(float)
    nan_labels[0] = np.nan
    analysis = [
        ("stock_rv_estimation-sharpe ratio", 1.25, {"target_metric": "sharpe ratio"}),
        ("causal_relation", np.array([[0, 1], [0, 0]]), {"relation_ratio": 0.4}),
        ("ecg_anomaly", labels, {}),
        ("ecg_anomaly", nan_labels, {}),  # the official run skips it
        ("stock_rv_estimation-sharpe ratio", Hostile(secret), {"target_metric": "sharpe ratio"}),
    ]
    rows = []
    for number, (qtype, truth, constraint) in enumerate(analysis):
        rows.append({
            "question_id": f"a{number}", "question_type": qtype, "prompt": f"Analyse ({number})", "data_str": "",
            "output_requirement": "Answer: prediction = np.array([...], dtype=np.float64)",
            "executor_variables": _dump(root, f"a{number}_vars.pkl", {"VAL": rng.normal(size=(40, 2)), "N": 5}),
            "ground_truth_data": _dump(root, f"a{number}_truth.pkl", truth),
            "context": _dump(root, f"a{number}_context.pkl", {"names": ["S"]}),
            "constraint": _dump(root, f"a{number}_constraint.pkl", constraint),
        })  # fmt: skip
    for name, table in (("multiple_choice.csv", mc), ("analysis_questions.csv", rows)):
        with (root / name).open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
    return root


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> tuple[Path, Path]:
    from tsbench.interop.tsaia_convert import convert_release

    base = tmp_path_factory.mktemp("tsaia")
    secret = base / "secret.txt"
    secret.write_text("HOST-SECRET-7f3a")
    release = write_release(base / "release", secret)
    manifest = convert_release(release, base / "converted", skip_unreadable=True)
    return manifest, secret


def test_the_converter_loads_pickles_in_the_jail_only(converted):
    manifest, secret = converted
    report = json.loads(manifest.read_text())
    assert list(report["unreadable"]) == ["data/a4_truth.pkl"]  # the hostile pickle: no host file in the jail
    assert "secret.txt" in report["unreadable"]["data/a4_truth.pkl"]
    for table in manifest.parent.glob("*.parquet"):
        assert b"HOST-SECRET" not in table.read_bytes()
    assert len(report["sources"]) == 2 + 12 * 2 + 5 * 4


def test_reader_and_family_score_as_official(converted, tmp_path):
    manifest, _ = converted
    items, skipped = tsaia_reader.read_items(manifest.parent)
    assert skipped == {"analysis_questions: a file could not be converted": 1} and len(items) == 12 + 4
    var = next(i for i in items if i.question_type == "VaR-confidence_level")
    assert var.channel_names[:3] == ["VAL_A.S0", "VAL_A.S1", "VAL_A.S2"] and var.values.shape == (9, 30)
    assert len(var.variables["WEIGHTS_A"]) == 3 and var.options[1] == "Option B: portfolio B"

    family = get_taskset("tsaia")
    out, _ = family.generate({"path": str(manifest.parent), "seed": 1}, tmp_path)
    rows = family.index([out.parent / "train.parquet", out.parent / "test.parquet"], {})
    assert len(rows) == 12 and set(rows["regime"]) == {"mc"}  # the paper's multiple-choice items by default
    assert (rows["split"] == "train").sum() == 6  # ceil(0.5 x 4) per question type, as TimeClaw
    row = rows.iloc[0]
    sample = family.load(SampleRef("tsaia", row["path"], row["id"]))
    letter = sample.gold["answer"]
    assert family.score(row["category"], sample.gold, json.dumps({"answer": letter})).score == 1.0
    lower = family.score(row["category"], sample.gold, json.dumps({"answer": letter.lower()}))
    assert lower.score == 0.0 and lower.valid  # the letter itself, as `predictions == answer`
    told = family.score(row["category"], sample.gold, f"The answer is {letter}")
    assert told.score == 0.0 and not told.valid and told.metrics["timeclaw_accuracy"] == 1.0

    out, _ = family.generate({"path": str(manifest.parent), "seed": 1, "categories": ["analysis"]}, tmp_path / "a")
    rows = family.index([out.parent / "train.parquet", out.parent / "test.parquet"], {})
    by_type = {}
    for _, row in rows.iterrows():
        by_type.setdefault(row["category"], []).append(family.load(SampleRef("tsaia", row["path"], row["id"])))
    sharpe = by_type["stock_rv_estimation-sharpe ratio"][0]
    assert family.score("stock_rv_estimation-sharpe ratio", sharpe.gold, '{"answer": 1.27}').metrics["status"] == 1
    assert family.score("stock_rv_estimation-sharpe ratio", sharpe.gold, '{"answer": 1.4}').score == 0.0
    causal = by_type["causal_relation"][0]
    assert family.score("causal_relation", causal.gold, '{"answer": [[0, 1], [0, 0]]}').metrics["accuracy"] == 1.0
    ecg = sorted(by_type["ecg_anomaly"], key=lambda s: s.gold["problematic"])
    hit = [0] * 40
    hit[11] = 1  # one point inside the anomaly: the adjustment marks the whole segment
    assert family.score("ecg_anomaly", ecg[0].gold, json.dumps({"answer": hit})).metrics["f1"] == 1.0
    skipped = family.score("ecg_anomaly", ecg[1].gold, json.dumps({"answer": hit}))
    assert ecg[1].gold["problematic"] and skipped.score == 0.0 and "skips" in skipped.error


def test_crafted_files_are_one_line_through_the_command_line(tmp_path, cli):
    release = tmp_path / "release"
    release.mkdir()
    np.save(release / "vars.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with (release / "multiple_choice.csv").open("w", newline="") as handle:
        handle.write("question_id,question_type,prompt,options,answer,executor_variables\n")
        handle.write("1,SharpeRatio,Which?,\"['Option A: x', 'Option B: y']\",A,vars.npy\n")
    code, _, err = cli("generate", "--family", "tsaia", "--path", str(release), "--out", str(tmp_path / "g"))
    assert code == 2 and "tsbench convert-tsaia" in err and err.strip().count("\n") == 0
    code, _, err = cli("convert-tsaia", "--path", str(release), "--out", str(tmp_path / "c"))
    assert code == 2 and "cannot read vars.npy" in err and "allow_pickle" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error:")
    (release / "multiple_choice.csv").write_text("question_id,executor_variables\n1,../outside.pkl\n")
    code, _, err = cli("convert-tsaia", "--path", str(release), "--out", str(tmp_path / "c"))
    assert code == 2 and "outside the release folder" in err


def test_unconverted_or_foreign_folders_are_refused(tmp_path):
    with pytest.raises(UserError, match="Melady/TSAIA"):
        tsaia_reader.read_tables(tmp_path)
    (tmp_path / "conversion.json").write_text('{"converted": "something else"}')
    with pytest.raises(UserError, match="convert again"):
        tsaia_reader.read_tables(tmp_path)


def test_score_out_writes_answers_of_every_type_side_by_side(converted, tmp_path, cli):
    """`{"answer": "A"}` beside `{"answer": 1}` (and floats, booleans, null, lists, objects): the scores
    file is written, each parsed answer as JSON text (pyarrow refused the mixed column before)."""
    manifest, _ = converted
    code, _, err = cli("generate", "--family", "tsaia", "--path", str(manifest.parent), "--out", str(tmp_path / "g"))
    assert code == 0, err
    data = next((tmp_path / "g").rglob("test.parquet"))
    rows = get_taskset("tsaia").index([data], {})
    values = ["A", 1, 2.5, True, None, [1, "B"], {"x": 1}, "B"]
    with (tmp_path / "r.jsonl").open("w") as handle:
        for number, rid in enumerate(rows["id"]):
            handle.write(
                json.dumps({"id": rid, "response": json.dumps({"answer": values[number % len(values)]})}) + "\n"
            )
    out = tmp_path / "scores.parquet"
    code, _, err = cli("score", "--data", str(data), "--responses", str(tmp_path / "r.jsonl"), "--out", str(out))
    assert code == 0 and "Traceback" not in err, err
    table = pd.read_parquet(out)
    parsed = [None if pd.isna(cell) else json.loads(cell) for cell in table["parsed_answer"]]
    assert parsed == [values[n % len(values)] for n in range(len(rows))]
    assert all(json.loads(g) in {"A", "B", "C", "D"} for g in table["gold_answer"])
