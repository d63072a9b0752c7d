"""What the families built from real recordings share: the parquet row contract, the window
sampler of the generalization sets (paper Appendix F), the classify-with-evidence scorer, a base
TaskFamily over generated files, and where each public dataset comes from.

The readers of the public formats (wfdb, pyedflib, aeon) are optional: `pip install
'tsbench[recordings]'`. They are imported only by `generate`, so evaluating generated files
needs nothing beyond the base install.
"""
