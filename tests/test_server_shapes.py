"""A 200 whose JSON has the wrong shape is a server error (retried, then an error row), never tsbench's
own bug ("internal", not retried) nor a reading of the model: each body here is served as written by a
real HTTP server on 127.0.0.1 and read by the real openai client.

Before: {"choices": {"a": 1}} raised KeyError and a 5,000-digit usage count raised ValueError out of
the client (both "internal" rows); a refusal of 5 with no content was kept as an honest empty reply;
a finish_reason of ["a"] or 100 KB of text went into every call's accounting; /v1/models saying
`"max_model_len": true` gave a context of 1 token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tsbench.models.base import Message, ModelError
from tsbench.models.context import server_context_tokens
from tsbench.models.openai_model import OpenAIChatModel
from tsbench.models.retry import RetryPolicy

pytestmark = pytest.mark.timeout(60)


def _reply(content: str = '"hi"', finish: str = '"stop"', message_extra: str = "", **top: str) -> str:
    """A chat.completion body with some fields written as raw JSON text."""
    fields = {"id": '"x"', "object": '"chat.completion"', "created": "1", "model": '"m"', **top}
    fields.setdefault(
        "choices",
        f'[{{"index": 0, "message": {{"role": "assistant", "content": {content}{message_extra}}}, '
        f'"finish_reason": {finish}}}]',
    )
    fields.setdefault("usage", '{"prompt_tokens": 3, "completion_tokens": 2}')
    return "{" + ", ".join(f'"{key}": {value}' for key, value in fields.items()) + "}"


@contextmanager
def serving(body: str) -> Iterator[str]:
    """A server answering every POST and GET with `body` (status 200, application/json)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _generate(body: str):
    with serving(body) as base_url:
        model = OpenAIChatModel("m", base_url=base_url, api_key="k", retry=RetryPolicy(max_attempts=2, base_delay_s=0))
        try:
            return model.generate([Message("user", "q")])
        finally:
            model.close()


@pytest.mark.parametrize(
    "body",
    [
        _reply(choices='{"a": 1}'),  # a dict where the list of choices goes
        _reply(usage='{"prompt_tokens": ' + "9" * 5000 + ', "completion_tokens": 1}'),  # over the int-string limit
        _reply(content='""', message_extra=', "refusal": 5'),  # empty, and a refusal that is no text
        _reply(content='""', finish='["length"]'),  # empty, and a finish reason that is no word
    ],
    ids=["choices_dict", "huge_int", "refusal_number", "finish_list"],
)
def test_a_body_of_the_wrong_shape_is_a_server_error(body):
    with pytest.raises(ModelError) as caught:
        _generate(body)
    assert caught.value.kind == "server"
    assert caught.value.attempts == 2  # retried like any server failure


def test_labels_that_are_not_short_words_are_unknown():
    completion = _generate(_reply(finish='["a"]', id='{"a": [1]}'))
    assert completion.text == "hi" and completion.extra["finish_reason"] is None
    assert completion.extra["response_id"] is None
    completion = _generate(_reply(finish=json.dumps("x" * 100_000)))
    assert completion.extra["finish_reason"] is None
    assert _generate(_reply(finish='"length"')).extra["finish_reason"] == "length"  # a real one is kept


@pytest.mark.parametrize(
    "entry, context",
    [
        ('{"id": "m", "max_model_len": true}', None),
        ('{"id": "m", "max_model_len": 1' + "0" * 40 + "}", None),
        ('{"id": "m", "max_model_len": -5}', None),
        ('{"id": "m", "meta": {"n_ctx": 4096.0}}', 4096),
        ('{"id": "m", "max_model_len": 8192}', 8192),
    ],
)
def test_a_listed_context_is_a_plausible_token_count(entry, context):
    with serving('{"data": [' + entry + "]}") as base_url:
        assert server_context_tokens(base_url, "m") == context


def test_a_model_listing_nested_past_the_parser_is_no_answer():
    with serving('{"data": ' + "[" * 100_000 + "]" * 100_000 + "}") as base_url:
        assert server_context_tokens(base_url, "m") is None
