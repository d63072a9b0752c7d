"""Issue 37, item 4: credentials go only where the user said. Judged by real loopback servers that log every
request's headers: one stands for the endpoint a config or the user names, a second (another port: another
origin) for where a redirect points.

Before: a --config file with base_url on its own server and api_key_env = "OPENAI_API_KEY" had that key
sent there without a word; the context-length probe (urllib) followed a 307 to another origin with the key;
the TimeClaw embedder sent OPENAI_ORG_ID and OPENAI_PROJECT_ID to any base URL."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tsbench.models.base import Message, ModelError
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.retry import RetryPolicy
from tsbench.testing.fake_openai_server import FakeOpenAIServer

KEY, ORG, PROJECT = "sk-user-secret", "org-user", "proj-user"
CREDENTIALS = ("authorization", "openai-organization", "openai-project")
COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
EMBEDDING = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}], "model": "e"}


class LoggingServer:
    """A server on 127.0.0.1 that logs (method, path, lower-cased headers) and answers `route(method, path)`:
    (status, headers, JSON body or None)."""

    def __init__(self, route: Callable[[str, str], tuple[int, dict, object]]) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                owner.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, headers, body = route(self.command, self.path)
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def credentials_seen(self) -> list[tuple[str, str, str]]:
        return [
            (path, name, headers[name]) for _, path, headers in self.requests for name in CREDENTIALS if name in headers
        ]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def elsewhere():
    """Another origin: it answers everything, and should never hear from us."""
    server = LoggingServer(lambda method, path: (200, {}, EMBEDDING if "embeddings" in path else COMPLETION))
    yield server
    server.close()


@pytest.fixture
def user_env(monkeypatch):
    monkeypatch.setenv("TSB_TEST_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_ORG_ID", ORG)
    monkeypatch.setenv("OPENAI_PROJECT_ID", PROJECT)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _redirecting(status: int, target: str) -> LoggingServer:
    return LoggingServer(lambda method, path: (status, {"Location": f"{target}{path}"}, None))


@pytest.mark.parametrize("status", [307, 308])
def test_the_chat_client_never_follows_a_redirect_to_another_origin(user_env, elsewhere, status):
    first = _redirecting(status, elsewhere.url)
    try:
        model = OpenAIChatModel("m", base_url=f"{first.url}/v1", api_key_env="TSB_TEST_KEY", retry=RetryPolicy(1))
        with pytest.raises(ModelError, match=f"HTTP {status}: the server redirected to {elsewhere.url}.*not followed"):
            model.generate([Message("user", "hello")])
        assert first.requests and first.requests[0][2]["authorization"] == f"Bearer {KEY}"  # the host the user named
        assert elsewhere.requests == []
        assert not any(name in headers for _, _, headers in first.requests for name in CREDENTIALS[1:])  # not OpenAI
    finally:
        first.close()


@pytest.mark.parametrize("status", [307, 308])
def test_the_context_probe_never_follows_a_redirect_to_another_origin(user_env, elsewhere, status):
    first = _redirecting(status, elsewhere.url)
    try:
        model = OpenAIChatModel("m", base_url=f"{first.url}/v1", api_key_env="TSB_TEST_KEY")
        assert model.context_tokens is None
        assert [path for _, path, _ in first.requests] == ["/v1/models"]
        assert elsewhere.requests == []  # urllib used to take the key there
    finally:
        first.close()


def test_a_redirect_within_the_origin_is_followed_with_the_key(user_env):
    def route(method, path):
        if path == "/v1/models":
            return 307, {"Location": "/v2/models"}, None
        if path == "/v2/models":
            return 200, {}, {"object": "list", "data": [{"id": "m", "max_model_len": 4096}]}
        if path == "/v1/chat/completions":
            return 308, {"Location": "/v2/chat/completions"}, None
        return 200, {}, COMPLETION

    server = LoggingServer(route)
    try:
        model = OpenAIChatModel("m", base_url=f"{server.url}/v1", api_key_env="TSB_TEST_KEY", retry=RetryPolicy(1))
        assert model.context_tokens == 4096
        assert model.generate([Message("user", "hello")]).text == "hi"
        paths = [(method, path) for method, path, _ in server.requests]
        assert paths == [("GET", "/v1/models"), ("GET", "/v2/models"), ("POST", "/v1/chat/completions")] + [
            ("POST", "/v2/chat/completions")
        ]
        assert all(headers["authorization"] == f"Bearer {KEY}" for _, _, headers in server.requests)
    finally:
        server.close()


def test_the_embedder_sends_organisation_and_project_only_to_openai(user_env, elsewhere):
    from tsbench.models.http import openai_client
    from tsbench.timeclaw.embed import OpenAIEmbedder

    embedder = OpenAIEmbedder("e", base_url=f"{elsewhere.url}/v1", api_key="local-key")
    assert embedder._one("a descriptor") == [1.0, 0.0]
    assert elsewhere.credentials_seen() == [("/v1/embeddings", "authorization", "Bearer local-key")]
    first = _redirecting(307, elsewhere.url)
    try:
        with pytest.raises(Exception, match="307"):
            OpenAIEmbedder("e", base_url=f"{first.url}/v1", api_key="local-key")._one("x")
        assert len(elsewhere.requests) == 1  # the redirect was not followed
    finally:
        first.close()
    official = openai_client("k", "https://api.openai.com/v1")  # built, never sent: the tests reach no other host
    assert (official.organization, official.project) == (ORG, PROJECT)


# -- a key named in a config file --------------------------------------------------------------------------


def _config(tmp_path, base_url: str, **keys) -> str:
    lines = ['model = "openai/fake-model"', 'harness = "single-pass-text"', f'base_url = "{base_url}"', "limit = 1"]
    lines += [f'{name} = "{value}"' for name, value in keys.items()]
    path = tmp_path / "shared.toml"
    path.write_text("[eval]\n" + "\n".join(lines) + "\n")
    return str(path)


def _eval(cli, config: str, small_data, out, *extra):
    return cli("eval", "--config", config, "--data", str(small_data), "--out", str(out), *extra)


def test_a_key_only_a_config_file_names_is_not_sent_to_its_server(user_env, small_data, tmp_path, cli):
    with FakeOpenAIServer(default='ok:{"answer": "Yes"}') as server:
        config = _config(tmp_path, server.base_url, api_key_env="OPENAI_API_KEY")
        code, _, err = _eval(cli, config, small_data, tmp_path / "refused")
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, err
        assert "OPENAI_API_KEY" in lines[0] and f"127.0.0.1:{server.port}" in lines[0]
        assert "--api-key-env OPENAI_API_KEY" in lines[0] and "--trust-config-keys" in lines[0]
        assert server.request_count == 0 and not (tmp_path / "refused").exists()

        code, _, err = _eval(cli, config, small_data, tmp_path / "named", "--api-key-env", "OPENAI_API_KEY")
        assert code == 0, err
        assert server.headers and all(h["authorization"] == f"Bearer {KEY}" for h in server.headers)
        assert not any("openai-organization" in h or "openai-project" in h for h in server.headers)

        seen = server.request_count
        code, _, err = _eval(cli, config, small_data, tmp_path / "trusted", "--trust-config-keys")
        assert code == 0, err
        assert server.request_count > seen


def test_the_same_rule_holds_for_model_args_and_the_judge(user_env, small_data, tmp_path, cli):
    from tsbench.eval.config_keys import config_key_refusals

    class Cfg:
        model, base_url, api_key_env, judge, judge_base_url, judge_api_key_env = "m", None, None, None, None, None
        model_args = ["base_url=http://10.1.2.3:9/v1", "api_key_env=OPENAI_API_KEY"]

    file = {"model_args": Cfg.model_args}
    (refusal,) = config_key_refusals(Cfg, file, {})
    assert "OPENAI_API_KEY (model_args api_key_env)" in refusal and "10.1.2.3:9" in refusal
    assert config_key_refusals(Cfg, file, {"model_args": Cfg.model_args}) == []  # typed on the command line
    Cfg.model_args, Cfg.api_key_env = None, "MY_KEY"
    assert config_key_refusals(Cfg, {"api_key_env": "MY_KEY"}, {}) == []  # OpenAI's own API: its own key
    Cfg.api_key_env, Cfg.judge, Cfg.judge_base_url, Cfg.judge_api_key_env = None, "gpt-4.1", "http://h:1/v1", "J"
    (refusal,) = config_key_refusals(Cfg, {"judge_api_key_env": "J"}, {})
    assert "J (judge_api_key_env)" in refusal and "--judge-api-key-env J" in refusal
    assert config_key_refusals(Cfg, {"judge_api_key_env": "J"}, {"judge_api_key_env": "J"}) == []
