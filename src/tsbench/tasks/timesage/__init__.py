"""TimeSage-EV: recurring, cutoff-isolated time-series analysis over evolving evidence.

A scenario (fixed contract: questions, schema, rules, keypoints, rubric) is instantiated once per
release period; the agent sees the cumulative table up to the period and the documents released
before it, never the target period's release, which decides the truth. Sources: `synthetic`
(default, from a seed), `replay` (real series statsmodels ships offline) and `released` (a local
folder in the paper's layout). Scoring: four axes (accuracy, coverage, faithfulness, quality).
Spec: /work/shared/spec/timesage.md; paper: TimeSage-EV (Yao, Kong et al., 2026).
"""
