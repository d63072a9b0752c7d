"""The one prompt a TSLM reads, at training and at evaluation: the question, then each channel's
name and length followed by a marker where that channel's series enters the model (no values as text)."""

from __future__ import annotations

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
