"""Names both sides of the tools harness agree on."""

import re

RESULT_TAG = "\x1eTSBENCH_TOOL_RESULT\x1e"
TOOL_FILE = "tool.py"
TOOL_JSON = "tool.json"
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
