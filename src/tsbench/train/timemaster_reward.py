"""TimeMaster's reward (timemaster §3.3, eq. 3-5, H.3) as pure functions of text. By default it is what
the public code that produced the published tables computes (langfengQ/TimeMaster,
verl/utils/reward_score; reproduced exactly on the golden vectors in tests/golden/timemaster/); the
paper's reading is the named option `format_rule = "paper"`.

* format_rule "public", no soft reward (the task modules, e.g. ctu.py): a reply is well formed when one
  of its `<class>` spans names a class (core/class_tags.py), anywhere, `<think>` never checked; the
  class is the first such span's. With the soft reward (emg_soft.py): the FIRST `<class>` span must
  name a class. Format 1 or 0; hard 1 when that class is the gold one (classes compare ignoring case).
* format_rule "paper": <think>, <class> and an optional <extension> (`require_extension`: required),
  each once, in that order, none inside another, reasoning and class non-empty; the hard reward reads
  the first `<class>` span.
* soft (emg_soft.py): asked only with the right class and a non-empty extension; the judge's reply is
  `float(reply)` (0 when it is not a float), generic advice capped at 0.4, a value outside [0, 1] asked
  again (here at most `judge_attempts` times). The prompt is the public clinical one for EMG, the
  paper's general prompt (H.3) elsewhere (`judge_prompt = "paper"`: the general prompt everywhere).
* total: w_fmt * format + w_hard * hard + w_soft * soft; (0.1, 0.9, 0) in the main results, soft 0.5 in
  the public soft-reward module (the paper's case studies: 1.0).

Nothing here calls a model: train/timemaster_judge.py asks the judge with `judge_prompt`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tsbench.core.class_tags import Namer, first_named, first_span

FORMAT_RULES = ("public", "paper")
JUDGE_PROMPTS = ("public", "paper")
TAGS = ("think", "class", "extension")
_TAG = re.compile(r"<(/?)(think|class|extension)\s*>", re.IGNORECASE)
# emg_soft.py's generic advice (its soft score is capped), matched in the lower-cased extension.
GENERIC_ADVICE = (
    r"further (diagnostic )?tests",
    r"clinical history",
    r"physical examination",
    r"refer to specialist",
    r"confirm the diagnosis",
)
CLINICAL_CATEGORIES = ("emg",)  # where the public code's judge asks its clinical prompt


@dataclass(frozen=True)
class TimeMasterReward:
    """The reward's settings; the defaults are the public code's main results."""

    format_rule: str = "public"  # public | paper (see the module doc)
    format_weight: float = 0.1
    hard_weight: float = 0.9
    soft_weight: float = 0.0  # > 0: the soft reward is scored (emg_soft.py: 0.5)
    require_extension: bool = False  # paper rule: the three-part format of the soft-reward runs
    judge_prompt: str = "public"  # public | paper
    judge_temperature: float = 1.0
    judge_max_tokens: int = 32
    judge_attempts: int = 3  # asks for one extension at most (the public code asks until in range)
    generic_cap: float = 0.4
    generic_advice: tuple[str, ...] = GENERIC_ADVICE

    def __post_init__(self) -> None:
        if self.format_rule not in FORMAT_RULES:
            raise ValueError(f"format_rule must be one of {', '.join(FORMAT_RULES)} (got {self.format_rule!r})")
        if self.judge_prompt not in JUDGE_PROMPTS:
            raise ValueError(f"judge_prompt must be one of {', '.join(JUDGE_PROMPTS)} (got {self.judge_prompt!r})")


DEFAULT = TimeMasterReward()


@dataclass(frozen=True)
class Tagged:
    think: str
    cls: str
    extension: str  # "" when the output has none


@dataclass(frozen=True)
class Reading:
    """What the reward reads in one reply: its format reward, the class it names (None: none) and the
    spans the soft reward's judge is shown."""

    format: float
    predicted: str | None
    tagged: Tagged


def parse_output(text: str | None, *, require_extension: bool = False) -> Tagged | None:
    """The paper's format: the spans of a well-formed output, None when the format is broken. Text
    around the tags is allowed; tag names are matched case-insensitively."""
    found = [(m.group(1) == "/", m.group(2).lower(), m.start(), m.end()) for m in _TAG.finditer(text or "")]
    names = [(closing, name) for closing, name, _, _ in found]
    three = [(closing, name) for name in TAGS for closing in (False, True)]
    if names != three and (require_extension or names != three[:4]):
        return None
    spans = [text[found[k][3] : found[k + 1][2]].strip() for k in range(0, len(found), 2)]  # type: ignore[index]
    if not spans[0] or not spans[1]:
        return None
    return Tagged(spans[0], spans[1], spans[2] if len(spans) > 2 else "")


def read(text: str | None, names: Namer, settings: TimeMasterReward = DEFAULT) -> Reading:
    """The format reward and the class of one reply under `settings.format_rule`; `names` maps a span's
    text to the class it names (TimerBed: an option, ignoring case) or None."""
    spans = Tagged(*(first_span(text, tag) for tag in TAGS))  # the first of each, as emg_soft.py shows its judge
    if settings.format_rule == "paper":
        parsed = parse_output(text, require_extension=settings.require_extension)
        shown = parsed or Tagged(spans.think, spans.cls, "")  # a broken format is not judged
        return Reading(float(parsed is not None), names(spans.cls), shown)
    predicted = names(spans.cls) if settings.soft_weight > 0 else first_named(text, names)
    return Reading(float(predicted is not None), predicted, spans)


def hard_reward(reading: Reading, gold_class: str) -> float:
    """Eq. 3: 1 when the class read is the gold class."""
    return float(reading.predicted is not None and reading.predicted == gold_class)


def wants_judge(reading: Reading, hard: float) -> bool:
    """The soft reward is asked for only with the right class and a non-empty extension."""
    return hard > 0 and bool(reading.tagged.extension)


# -- the soft reward's judge ---------------------------------------------------------------------
def judge_prompt(tagged: Tagged, category: str = "", settings: TimeMasterReward = DEFAULT) -> str:
    """The judge's one user message: emg_soft.py's clinical prompt for EMG under `judge_prompt = "public"`,
    else the paper's general prompt (H.3). Both ask for ONE float, the mean of four criteria."""
    if settings.judge_prompt == "public" and category in CLINICAL_CATEGORIES:
        return _clinical_prompt(tagged)
    return _general_prompt(tagged)


def _clinical_prompt(tagged: Tagged) -> str:
    return (
        "You are a clinical evaluation assistant. The following is a model-generated diagnostic reasoning, "
        "prediction, and clinical recommendation (called 'extension').\n\n"
        f"Reasoning: {tagged.think}\nPrediction: {tagged.cls}\n"
        f"Extension (clinical recommendation): {tagged.extension}\n\n"
        "Evaluate the clinical recommendation (extension) based on the following four dimensions. For each, "
        "assign a score between 0.0 and 1.0. After scoring, return ONLY the **average score** as a single "
        "float (e.g., 0.625).\n\n"
        "Scoring dimensions:\n"
        "1. Specificity \u2013 Is the recommendation tailored to the case, or is it generic advice?\n"
        "2. Appropriateness \u2013 Is it clinically sound and aligned with the predicted condition?\n"
        "3. Relevance \u2013 Does it logically follow from the reasoning and prediction?\n"
        "4. Depth \u2013 Does it show clinical judgment and insight?\n\n"
        "Return only the average score as a float between 0.0 and 1.0."
    )


def _general_prompt(tagged: Tagged) -> str:
    return (
        "You are an expert assistant evaluating a model-generated reasoning, classification, and recommendation "
        "output. The goal is to assess the quality of the recommendation (i.e., extension) based on the "
        "following structured output:\n\n"
        f"Reasoning: {tagged.think}\nPrediction: {tagged.cls}\nExtension: {tagged.extension}\n\n"
        "Score the extension based on the following four criteria, each on a scale from 0.0 to 1.0. Then "
        "return only the average score as a single float (e.g., 0.625).\n\n"
        "Evaluation Criteria:\n"
        "1. Specificity - Is the extension clearly tailored to the predicted class or context, avoiding generic "
        "language?\n"
        "2. Appropriateness - Is the recommendation suitable given the prediction and reasoning?\n"
        "3. Relevance - Does the extension logically follow from the preceding reasoning and predicted class?\n"
        "4. Depth - Does the extension demonstrate domain knowledge, including detailed actions or next-step "
        "considerations?\n\n"
        "Instructions:\n"
        '- Penalize vague or generic outputs (e.g., "be careful") unless well-justified.\n'
        "- Reward informative, actionable, and context-aware suggestions.\n"
        "- Return only a single float between 0.0 and 1.0."
    )


def cap_generic(extension: str, score: float, settings: TimeMasterReward = DEFAULT) -> float:
    """emg_soft.py's penalty: generic advice scores at most `generic_cap` (`min`, so NaN stays NaN)."""
    lowered = extension.lower()
    if any(re.search(pattern, lowered) for pattern in settings.generic_advice):
        return min(score, settings.generic_cap)
    return score


def judge_value(reply: str, extension: str, settings: TimeMasterReward = DEFAULT) -> float | None:
    """One judge reply read as emg_soft.py reads it: `float` of the stripped text (0 when it is not a
    float), capped when the advice is generic; None when the value is outside [0, 1] (ask again)."""
    try:
        score = float(reply.strip())
    except ValueError:
        return 0.0
    score = cap_generic(extension, score, settings)
    return score if 0.0 <= score <= 1.0 else None


def judged_score(ask: Callable[[], str], extension: str, settings: TimeMasterReward = DEFAULT) -> float:
    """The soft score from replies `ask()` returns: the first usable one, 0 when a call fails or
    `judge_attempts` asks give no value in [0, 1]."""
    for _ in range(max(1, settings.judge_attempts)):
        try:
            reply = ask()
        except Exception:  # an unreachable judge must not stop training: the rollout earns no soft reward
            return 0.0
        value = judge_value(reply, extension, settings)
        if value is not None:
            return value
    return 0.0
