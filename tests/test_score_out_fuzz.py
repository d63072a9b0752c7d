"""`tsbench score --out` on fuzzed answer mixes (issue 49): whatever JSON a reply's `answer` holds --
text, integers past 64 bits, floats, NaN, booleans, null, lists, objects, nested -- the scores file is
written and each parsed answer reads back as the value the scorer parsed."""

from __future__ import annotations

import json
import random

import pandas as pd

from tsbench.cli.data import score_table


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return rng.choice(["A", "Yes", "No Anomaly", "", "é ∑ 😀", "1-3σ", "null", "{"])
    if kind == 1:
        return rng.randint(-(2**70), 2**70)
    if kind == 2:
        return rng.choice([0.0, -0.0, 1e308, 2.5, float("nan"), float("inf"), rng.uniform(-1e6, 1e6)])
    if kind == 3:
        return rng.choice([True, False])
    if kind == 4:
        return None
    if kind == 5:
        return rng.randint(0, 9)
    if kind == 6:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["answer", "x", "", "ü"]) + str(i): _value(rng, depth + 1) for i in range(rng.randrange(4))}


def test_score_table_writes_any_mix_of_answers(tmp_path):
    rng = random.Random(49)
    for trial in range(20):
        answers = [(_value(rng), _value(rng)) for _ in range(rng.randrange(1, 40))]
        df = pd.DataFrame({"id": [str(i) for i in range(len(answers))], "score": 0.0})
        out = tmp_path / f"scores-{trial}.parquet"
        score_table(df, answers).to_parquet(out, index=False)
        back = pd.read_parquet(out)
        for (parsed, gold), cell, gold_cell in zip(answers, back["parsed_answer"], back["gold_answer"]):
            # JSON text round trip (NaN compares unequal to itself, so the texts are compared)
            assert pd.isna(cell) == (parsed is None) and pd.isna(gold_cell) == (gold is None)
            if parsed is not None:
                assert json.dumps(json.loads(cell)) == json.dumps(parsed)
            if gold is not None:
                assert json.dumps(json.loads(gold_cell)) == json.dumps(gold)


def test_score_out_on_fuzzed_replies(small_data, tmp_path, cli):
    from tsbench.tasks.anomalyxl.rows import read_index

    data = small_data / "test-coarse.parquet"
    rng = random.Random(4949)
    lines = []
    for rid in read_index(data)["id"]:
        value = _value(rng)
        reply = rng.choice([json.dumps({"answer": value}), f"Answer: {value}", json.dumps(value), ""])
        lines.append(json.dumps({"id": rid, "response": reply}))
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "scores.parquet"
    code, _, err = cli("score", "--data", str(data), "--responses", str(tmp_path / "r.jsonl"), "--out", str(out))
    assert code == 0 and "Traceback" not in err, err
    table = pd.read_parquet(out)
    assert len(table) == len(lines)
    for cell in table["parsed_answer"].dropna():
        json.loads(cell)  # every parsed answer is JSON text
