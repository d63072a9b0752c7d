"""What an eval checks once before its first row: where it writes, and that the servers it names answer.

An unwritable output (a file where the run folder goes, a read-only mount, no room) would otherwise end
in a traceback after the model has loaded; an unreachable `--base-url` would fail every row, one error
row at a time, each after its retries. One TCP connect per server, bounded by PROBE_TIMEOUT_S, finds it
first (no request is sent, so no key travels and no server counts a call).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from tsbench.core.errors import UserError
from tsbench.core.out_paths import writable_folder

PROBE_TIMEOUT_S = 5.0


def probe(url: str, flag: str = "--base-url", timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """One connect to the host and port `url` names; one line naming the URL when nothing answers."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{flag} {url} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UserError(f"{flag} {url}: the port is not a number from 1 to 65535") from None
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            pass
    except socket.gaierror:
        raise UserError(f"cannot reach {url} ({flag}): no host named {parts.hostname}") from None
    except TimeoutError:
        raise UserError(f"cannot reach {url} ({flag}): no answer in {timeout_s:g} s; is the server up?") from None
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower()
        raise UserError(f"cannot reach {url} ({flag}): {why}; start the server or fix {flag}") from None


def preflight(cfg) -> None:
    """Refuse, in one line and before any model loads or row runs, an output eval cannot write or a
    server that does not answer."""
    if cfg.out:
        writable_folder(Path(cfg.out), "--out")
    else:
        writable_folder(Path(cfg.log_dir or "results"), "--log-dir")
    model = cfg.model_options()
    if (url := model.get("base_url")) and _key_is_set(model):
        probe(str(url), "--base-url")
    judge = cfg.judge_options() if cfg.judge and not str(cfg.judge).startswith("judge/") else {}
    if (url := judge.get("base_url")) and _key_is_set(judge):
        probe(str(url), "--judge-base-url")


def _key_is_set(options: dict) -> bool:
    """Whether the key variable the options name (if any) is set: an unset one is the first mistake to
    name, and building the client says so, so the probe leaves it to that."""
    env = options.get("api_key_env")
    return not env or bool(os.environ.get(str(env)))


def with_limit_note(cfg, on_update):
    """`on_update` that first adds `limit_note` to the run's notes (shown as the run starts)."""
    pending = [True]

    def update(progress) -> None:
        if pending and progress.total:
            pending.clear()
            if note := limit_note(cfg, progress.total):
                progress.notes.append(note)
        on_update(progress)

    return update


def limit_note(cfg, total_rows: int) -> str | None:
    """What a --limit larger than the selection runs instead, said once (never silently fewer rows)."""
    if cfg.limit is None or total_rows >= cfg.limit * max(cfg.epochs, 1):
        return None
    rows = total_rows // max(cfg.epochs, 1)
    return f"--limit {cfg.limit}: the selection holds {rows} rows; running those {rows}"
