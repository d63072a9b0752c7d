"""tsbench: long-context time-series reasoning benchmarks for language-model agents."""

__version__ = "0.1.0"
