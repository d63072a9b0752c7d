"""The one prompt a TSLM reads, at training and at evaluation: the question, then each channel's
name and length followed by a marker where that channel's series enters the model (no values as text)."""

from __future__ import annotations

import ast
import re

SERIES_MARKER = "<ts>"  # where a channel's series embeddings (or, for Flamingo, nothing) stand in the text
TSLM_SYSTEM = "You are a time-series analyst. Answer the question about the series in the required format."


def series_user_prompt(question: str, channel_names: list[str], length: int) -> str:
    lines = [f"Channel {name!r} ({length} samples): {SERIES_MARKER}" for name in channel_names]
    return "\n".join(["The series:", *lines, "", question])


def split_at_markers(text: str, channels: int) -> list[str]:
    """The rendered prompt's text pieces around the markers: channels + 1 pieces."""
    pieces = text.split(SERIES_MARKER)
    if len(pieces) != channels + 1:
        raise ValueError(f"the prompt holds {len(pieces) - 1} series markers for {channels} channel(s)")
    return pieces


_CHANNEL_LINE = re.compile(rf"^Channel (?P<name>'.*'|\".*\") \((?P<length>\d+) samples\): {re.escape(SERIES_MARKER)}$")


def toto_user_prompt(text: str) -> str:
    """The series prompt in Toto-1.0-QA's (ARFBench's) arrangement: the question first, then "Time Series
    Channels (in order):" with one "Channel k: name" line each and a metadata block (the length; tsbench has
    no timestamps); no markers (Toto's series tokens lead the whole text).
    A text not in series_user_prompt's form comes back without its markers only."""
    lines = text.split("\n")
    matches = [_CHANNEL_LINE.match(line) for line in lines[1:]]
    count = next((i for i, m in enumerate(matches) if m is None), len(matches))
    if lines[0] != "The series:" or count == 0 or lines[1 + count : 2 + count] != [""]:
        return text.replace(f" {SERIES_MARKER}", "").replace(SERIES_MARKER, "")
    names = [ast.literal_eval(m["name"]) for m in matches[:count]]
    question = "\n".join(lines[2 + count :])
    channels = [f"Channel {k}: {name}" for k, name in enumerate(names, start=1)]
    length = matches[0]["length"]  # ARFBench's metadata block gives interval and duration; tsbench knows the length
    metadata = ["Time Series Metadata:", f"- Samples per channel: {length}"]
    return "\n".join([question, "", "Time Series Channels (in order):", *channels, "", *metadata])
