"""vLLM models: reuse a running OpenAI-compatible vLLM server, or start one for the run and stop it after.

vLLM is an optional extra (GPU only); this module never imports it, it only runs its documented CLI
(`vllm serve MODEL --host 127.0.0.1 --port P`) in a subprocess of its own process group and waits on
GET /health. Talking to the server is the OpenAI client's job (openai_model.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from tsbench.models.base import Agent, Completion, Message, ModelUnavailableError, TaskInfo
from tsbench.models.endpoint import api_key_for, same_origin
from tsbench.models.openai_model import OpenAIChatModel

log = logging.getLogger(__name__)

NOT_INSTALLED = "vLLM is not installed: pip install 'tsbench[gpu]'"


class VLLMNotInstalledError(ModelUnavailableError):
    """vllm/ was asked for on a machine without the [gpu] extra."""

    def __init__(self) -> None:
        super().__init__(NOT_INSTALLED)


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def openai_base_url(url: str) -> str:
    """A server root ("http://host:8000") gets the /v1 the OpenAI client expects; a full base URL is kept."""
    url = url.rstrip("/")
    return url + "/v1" if urlsplit(url).path in ("", "/") else url


def _serve_command(model: str, port: int, extra_args: Sequence[str]) -> list[str]:
    """`vllm serve` from this interpreter's environment; the older module entry point as a fallback."""
    executable = Path(sys.executable).parent / "vllm"
    vllm_cli = str(executable) if executable.exists() else shutil.which("vllm")
    address = ["--host", "127.0.0.1", "--port", str(port)]
    if vllm_cli:
        return [vllm_cli, "serve", model, *address, *extra_args]
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, *address, *extra_args]


class VLLMServer:
    """A `vllm serve` subprocess bound to 127.0.0.1, healthy on entry and stopped on exit."""

    def __init__(
        self,
        model: str,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout_s: float = 1200.0,
        stop_timeout_s: float = 30.0,
    ):
        self.model = model
        self.port = port
        self.extra_args = tuple(extra_args)
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> VLLMServer:
        if not vllm_installed():
            raise VLLMNotInstalledError()
        if self.port is None:
            self.port = free_port()
        command = _serve_command(self.model, self.port, self.extra_args)
        # Server output goes to a file, not a pipe nobody reads (a full pipe would stall the server).
        self._log_file = tempfile.NamedTemporaryFile(prefix="tsbench-vllm-", suffix=".log", delete=False)
        log.info("starting vLLM for %s on port %d (log: %s)", self.model, self.port, self._log_file.name)
        self._process = subprocess.Popen(
            command, stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        try:
            self._wait_until_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_healthy(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited with code {self._process.returncode} before it was ready; "
                    f"last output:\n{self.log_tail()}"
                )
            with contextlib.suppress(urllib.error.URLError, OSError):
                with urllib.request.urlopen(f"{self.url}/health", timeout=2.0) as response:
                    if response.status == 200:
                        log.info("vLLM ready on port %d", self.port)
                        return
            time.sleep(1.0)
        raise TimeoutError(
            f"vLLM was not healthy within {self.startup_timeout_s:.0f}s; last output:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        if self._log_file is None:
            return ""
        try:
            text = Path(self._log_file.name).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM the whole process group (vLLM forks engine workers), SIGKILL if it lingers."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("vLLM did not stop within %.0fs; killing it", self.stop_timeout_s)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class VLLMChatModel(Agent):
    """`vllm/<hf-id-or-path>`: a server at VLLM_BASE_URL (or `base_url`) if given, else one started here.

    The API key is the variable `api_key_env` names, else VLLM_API_KEY, else a placeholder, never
    OPENAI_API_KEY: that one is not sent to whatever server VLLM_BASE_URL names. VLLM_API_KEY goes only
    to the origin VLLM_BASE_URL names, the pair the user exported: a `base_url` from elsewhere (a shared
    config's `base_url = ...`) gets the placeholder unless `api_key_env` names a key for it.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout_s: float = 1200.0,
        **client_options: Any,
    ):
        self.name = f"vllm/{model}"
        self.model = model
        self.server: VLLMServer | None = None
        exported = os.environ.get("VLLM_BASE_URL")
        url = base_url or exported
        if url:
            url = openai_base_url(url)
        else:
            self.server = VLLMServer(
                model, port=port, extra_args=extra_args, startup_timeout_s=startup_timeout_s
            ).start()
            url = self.server.base_url
        try:
            paired = bool(exported) and same_origin(url, openai_base_url(exported))
            key = api_key_for(
                url, api_key=api_key, api_key_env=api_key_env, fallback_env="VLLM_API_KEY" if paired else None
            )
            self.client = OpenAIChatModel(model, base_url=url, api_key=key, name=self.name, **client_options)
        except BaseException:
            self.close()
            raise

    @property
    def context_tokens(self) -> int | None:
        """The server's max_model_len (or a declared context_tokens): the single-pass text budget fits it."""
        return self.client.context_tokens

    def generate(
        self,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        task: TaskInfo | None = None,
    ) -> Completion:
        return self.client.generate(messages, max_tokens=max_tokens, temperature=temperature, task=task)

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        if self.server is not None:
            self.server.stop()
            self.server = None
