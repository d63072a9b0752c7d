"""Issue 29, fault 4: an episode's wall clock holds inside one reply. Each cell gets the time left as
its timeout and the block loop stops once it is spent, so one reply of four `sleep(1000)` blocks under
`episode_wall_s=5, cell_timeout_s=10` ends in about 5 s (it ran 43.6 s), as a wall_clock error row.
And a reply runs at most `max_blocks_per_reply` blocks; the observation says how many were skipped."""

from __future__ import annotations

import time

import pytest

from jail_episode import FINAL, ScriptedChat, attack_task
from tsbench.harness import play
from tsbench.harness.rlm import RLMSettings

pytestmark = pytest.mark.timeout(120)


def _reply(*blocks: str) -> str:
    return "Let me look.\n" + "\n".join(f"```python\n{block}\n```" for block in blocks)


def test_the_episode_wall_clock_holds_inside_one_reply():
    model = ScriptedChat([_reply(*["import time\ntime.sleep(1000)"] * 4), FINAL])
    began = time.monotonic()
    outcome = play(model, "rlm", attack_task(), RLMSettings(max_turns=4, episode_wall_s=5, cell_timeout_s=10))
    seconds = time.monotonic() - began
    assert outcome.error_type == "wall_clock", outcome.error
    assert seconds < 9, seconds  # ~5 s, not 4 x 10 s of cell timeouts
    assert len(model.prompts) == 1  # no further model call once the time was spent
    cells = [cell for entry in outcome.result.transcript if entry["role"] == "tool" for cell in entry["cells"]]
    assert 1 <= len(cells) <= 2 and cells[0]["timed_out"]


def test_blocks_beyond_the_per_reply_cap_are_not_run():
    blocks = [f"print('BLOCK', {index})" for index in range(5)]
    model = ScriptedChat([_reply(*blocks), FINAL])
    outcome = play(model, "rlm", attack_task(), RLMSettings(max_turns=4, max_blocks_per_reply=3))
    assert outcome.error is None, outcome.error
    observation = next(entry["observation"] for entry in outcome.result.transcript if entry["role"] == "tool")
    assert all(f"BLOCK {index}" in observation for index in range(3))
    assert "BLOCK 3" not in observation and "BLOCK 4" not in observation
    assert "[2 more code block(s) not run: at most 3 per reply]" in observation
    assert outcome.result.code_cells == 3
