"""TimeMaster's answer tags read the way its public reward code reads them (langfengQ/TimeMaster,
verl/utils/reward_score; golden vectors in tests/golden/timemaster/).

A tag's span runs from an opening `<class>` (tag names in any case) to the next closing `</class>`;
spans are taken in the order of their openings, so `<class>a<class>b</class>` holds "a<class>b" and "b".
A span names a class when its text, without surrounding whitespace, equals one class ignoring case
(`Desktop.` names none). Two readings of a reply:

* `first_named`: the first span that names a class, anywhere in the reply, `<think>` included (the
  task modules' `re.search(r"<class>\\s*(label|...)\\s*</class>", text, re.IGNORECASE)`).
* `first_span`: the first span only, whatever it holds (emg_soft.py's `extract_tag_content`).

Shared by TimerBed's scorer and TimeMaster's reward in training, so both read a reply alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

# TimeMaster H.2: what the three-part format (the soft-reward runs) adds to the instruction.
EXTENSION_SENTENCE = (
    "Finally, provide an additional recommendation, suggestion, or interpretation based on your reasoning and "
    "prediction. This part MUST be enclosed within <extension> </extension> tags."
)
Namer = Callable[[str], "str | None"]  # a span's text -> the class it names, or None
_OPEN = {tag: re.compile(f"<{tag}>", re.IGNORECASE) for tag in ("think", "class", "extension")}
_CLOSE = {tag: re.compile(f"</{tag}>", re.IGNORECASE) for tag in ("think", "class", "extension")}


def tag_spans(text: str | None, tag: str = "class", budget: int | None = None) -> Iterator[str]:
    """The raw text of every `<tag>` span (opening to the next closing), in order of the openings.

    Openings before one closing share it, so their spans overlap: n openings then one closing hold
    about n * n / 2 characters. Spans are yielded while their total length stays within `budget`
    (default: four times the text and 64 KiB), so reading them all stays linear; a reply never holds
    that many spans but to be read that way."""
    text = text or ""
    budget = 4 * len(text) + 65536 if budget is None else budget
    closing = None
    for opening in _OPEN[tag].finditer(text):
        if closing is None or closing.start() < opening.end():  # the closing is found once per closing
            closing = _CLOSE[tag].search(text, opening.end())
        if closing is None:  # no later opening has a closing either
            return
        budget -= closing.start() - opening.end()
        if budget < 0:
            return
        yield text[opening.end() : closing.start()]


def first_span(text: str | None, tag: str = "class") -> str:
    """The first `<tag>` span without surrounding whitespace, "" when there is none."""
    return next(tag_spans(text, tag), "").strip()


def named_option(text: str, options: Sequence[str]) -> str | None:
    """The option `text` names: equal to it without surrounding whitespace, ignoring case."""
    wanted = text.strip().lower()
    return next((option for option in options if option.lower() == wanted), None)


def with_extension_sentence(question: str) -> str:
    """`question` (ending with TimeMaster's instruction) asking for the extension too, on a line of its own."""
    separator = "" if question.endswith("\n") else "\n"
    return f"{question}{separator}{EXTENSION_SENTENCE}"


def first_named(text: str | None, names: Namer) -> str | None:
    """The class of the first `<class>` span that names one (see the module doc), None when none does."""
    for span in tag_spans(text):
        found = names(span.strip())
        if found is not None:
            return found
    return None
