"""ARFBench (paper §4.2): multiple-choice anomaly questions over real observability telemetry,
read from the released question CSV and time-series parquet files; Tier 2 by default."""
