"""TSAIA: financial time-series analysis, multiple-choice and analysis items with their checkers."""
