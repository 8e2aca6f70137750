"""`WebSearchTools`: ``web_search`` over the Brave Search API or a SearxNG instance, results normalised and bounded.

Providers sit behind one small seam (`SearchProvider`): each turns a query into a list of
`SearchHit` (title, url, snippet). Off unless a provider is configured: pass one, or set the
environment (`search_provider_from_env`).

Errors: a 429 (rate limit), a 5xx, a timeout or a refused connection is an infrastructure error
(``ConnectionError``/``TimeoutError``: retried, since ``web_search`` is idempotent); rejected
credentials and an answer that is not the provider's JSON are infrastructure errors too
(``PermissionError``, `SearchProviderError`): the model cannot fix them. A query the provider
refuses (another 4xx) is a business error the model can fix.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Mapping
from typing import Any, Protocol, TypedDict, runtime_checkable

from .._errors import ToolError, UserError
from .._json import loads
from ..tools import FunctionTool, ToolAnnotations, Toolset
from ._fetch import import_httpx

__all__ = (
    "BraveSearch",
    "SearchHit",
    "SearchProvider",
    "SearchProviderError",
    "SearxNG",
    "WebSearchTools",
    "search_provider_from_env",
)

_MAX_QUERY = 400
_MAX_TITLE = 300
_MAX_SNIPPET = 1000
_MAX_URL = 2048
_TAG = re.compile(r"<[^>]{0,200}>")
_SPACE = re.compile(r"\s+")
_BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"


class SearchHit(TypedDict):
    """One search result, the same for every provider."""

    title: str
    url: str
    snippet: str


class SearchProviderError(RuntimeError):
    """The search provider answered with something that is not its documented JSON."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


SearchProviderError.__module__ = "toolplan.builtin"  # public there


@runtime_checkable
class SearchProvider(Protocol):
    """A web search backend: ``search(query, limit)`` returns at most ``limit`` hits."""

    name: str

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        """The hits for ``query``, best first."""
        ...


def _text(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    text: str = _SPACE.sub(" ", html.unescape(_TAG.sub("", value[: limit * 4]))).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _hit(title: Any, url: Any, snippet: Any) -> SearchHit | None:
    """A normalised hit, or None for an entry without a usable http(s) URL."""
    if not isinstance(url, str) or len(url) > _MAX_URL or not url.startswith(("https://", "http://")):
        return None
    if any(c in url for c in "\r\n\t "):
        return None
    return {"title": _text(title, _MAX_TITLE) or url, "url": url, "snippet": _text(snippet, _MAX_SNIPPET)}


class _HttpProvider:
    """GET a JSON body within a deadline and a size bound, mapping statuses to error kinds."""

    name = "http"

    def __init__(self, *, timeout: float, max_response_bytes: int) -> None:
        if not timeout > 0 or max_response_bytes < 1024:
            raise UserError(f"{type(self).__name__}: timeout must be > 0 and max_response_bytes at least 1024.")
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes

    async def _get_json(self, url: str, params: Mapping[str, str], headers: Mapping[str, str]) -> Any:
        httpx = import_httpx("WebSearchTools", "websearch")
        body = bytearray()
        try:
            async with (
                httpx.AsyncClient(timeout=self.timeout, trust_env=False, follow_redirects=False) as client,
                client.stream("GET", url, params=dict(params), headers={"Accept": "application/json", **headers}) as r,
            ):
                status = r.status_code
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > self.max_response_bytes:
                        raise SearchProviderError(
                            f"{self.name} sent more than {self.max_response_bytes} bytes; it is not a search answer."
                        )
        except httpx.TimeoutException as exc:
            raise TimeoutError(f"{self.name} did not answer within {self.timeout} s.") from exc
        except httpx.HTTPError as exc:
            raise ConnectionError(f"{self.name} could not be reached: {type(exc).__name__}: {exc}"[:300]) from exc
        if status == 429:
            raise ConnectionError(f"{self.name} rate limit reached (HTTP 429): wait and search again.")
        if status >= 500:
            raise ConnectionError(f"{self.name} failed (HTTP {status}); try again later.")
        if status in (401, 403):
            raise PermissionError(self._refused(status))
        if status >= 400:
            raise ToolError(f"{self.name} refused the query (HTTP {status}): shorten or rephrase it.")
        if status != 200:
            raise SearchProviderError(f"{self.name} answered HTTP {status}, not 200 with JSON.")
        try:
            return loads(bytes(body).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise SearchProviderError(f"{self.name} answered with something that is not JSON.") from exc

    def _refused(self, status: int) -> str:
        return f"{self.name} rejected the request (HTTP {status}): check its configuration."

    def _results(self, data: Any, *path: str) -> list[Any]:
        for key in path:
            if not isinstance(data, dict):
                raise SearchProviderError(f"{self.name} answered JSON without {'.'.join(path)!r}.")
            data = data.get(key, [])
        if not isinstance(data, list):
            raise SearchProviderError(f"{self.name} answered JSON whose {'.'.join(path)!r} is not a list.")
        return data


class BraveSearch(_HttpProvider):
    """The Brave Search API (web results).

    Args:
        api_key: The subscription token (default: ``$BRAVE_SEARCH_API_KEY``).
        url: The endpoint (a local server in tests).
        timeout: Seconds for one search.
        max_response_bytes: Largest answer read.
    """

    name = "Brave Search"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        url: str = _BRAVE_URL,
        timeout: float = 15.0,
        max_response_bytes: int = 2 * 1024 * 1024,
    ) -> None:
        super().__init__(timeout=timeout, max_response_bytes=max_response_bytes)
        key = api_key if api_key is not None else os.environ.get("BRAVE_SEARCH_API_KEY", "")
        if not key.strip():
            raise UserError("BraveSearch needs an API key: pass api_key=... or set BRAVE_SEARCH_API_KEY.")
        self._key = key.strip()
        self.url = url

    def __repr__(self) -> str:  # never the key
        return f"BraveSearch(url={self.url!r})"

    def _refused(self, status: int) -> str:
        return f"Brave Search rejected the API key (HTTP {status}): check BRAVE_SEARCH_API_KEY and its plan."

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        """Search the web with Brave; returns at most ``limit`` hits."""
        data = await self._get_json(self.url, {"q": query, "count": str(limit)}, {"X-Subscription-Token": self._key})
        hits = (_hit(r.get("title"), r.get("url"), r.get("description")) for r in self._results(data, "web", "results")
                if isinstance(r, dict))  # fmt: skip
        return [h for h in hits if h is not None][:limit]


class SearxNG(_HttpProvider):
    """A SearxNG instance (self-hosted metasearch) with its JSON format enabled.

    Args:
        url: The instance's base URL (default: ``$SEARXNG_URL``), e.g. ``http://127.0.0.1:8888``.
        timeout: Seconds for one search.
        max_response_bytes: Largest answer read.
    """

    name = "SearxNG"

    def __init__(
        self, url: str | None = None, *, timeout: float = 15.0, max_response_bytes: int = 2 * 1024 * 1024
    ) -> None:
        super().__init__(timeout=timeout, max_response_bytes=max_response_bytes)
        base = url if url is not None else os.environ.get("SEARXNG_URL", "")
        if not base.startswith(("http://", "https://")):
            raise UserError(f"SearxNG needs the http(s) URL of an instance (or SEARXNG_URL), not {base[:100]!r}.")
        self.url = base.rstrip("/") + "/search"

    def __repr__(self) -> str:
        return f"SearxNG(url={self.url!r})"

    def _refused(self, status: int) -> str:
        return (
            f"SearxNG refused the JSON format (HTTP {status}): add json to search.formats in its settings.yml "
            "(formats: [html, json])."
        )

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        """Search with SearxNG; returns at most ``limit`` hits."""
        data = await self._get_json(self.url, {"q": query, "format": "json"}, {})
        hits = (_hit(r.get("title"), r.get("url"), r.get("content")) for r in self._results(data, "results")
                if isinstance(r, dict))  # fmt: skip
        return [h for h in hits if h is not None][:limit]


def search_provider_from_env(env: Mapping[str, str] | None = None) -> SearchProvider | None:
    """The provider the environment configures, or None (web search stays off).

    ``TOOLPLAN_WEBSEARCH`` names it (``brave`` or ``searxng``); without it, Brave when
    ``BRAVE_SEARCH_API_KEY`` is set, else SearxNG when ``SEARXNG_URL`` is.

    Raises:
        UserError: ``TOOLPLAN_WEBSEARCH`` names an unknown provider, or one whose setting is missing.
    """
    env = os.environ if env is None else env
    choice = env.get("TOOLPLAN_WEBSEARCH", "").strip().lower()
    if choice not in ("", "brave", "searxng"):
        raise UserError(f"TOOLPLAN_WEBSEARCH must be 'brave' or 'searxng', not {choice[:40]!r}.")
    if choice == "brave" or (not choice and env.get("BRAVE_SEARCH_API_KEY", "").strip()):
        return BraveSearch(env.get("BRAVE_SEARCH_API_KEY", ""))
    if choice == "searxng" or (not choice and env.get("SEARXNG_URL", "").strip()):
        return SearxNG(env.get("SEARXNG_URL", ""))
    return None


class WebSearchTools(Toolset):
    """``web_search(query, limit)``: search the web; results are ``{title, url, snippet}``, best first.

    Args:
        provider: The backend (`BraveSearch`, `SearxNG` or your own `SearchProvider`); default: the
            one the environment configures (`search_provider_from_env`).
        max_results: Most results one call returns (1-50).
        prefix: Put in front of the function name (see `Toolset`).

    Raises:
        UserError: no provider is given or configured (web search is off until one is).
    """

    def __init__(self, provider: SearchProvider | None = None, *, max_results: int = 10, prefix: str = "") -> None:
        provider = provider if provider is not None else search_provider_from_env()
        if provider is None:
            raise UserError(
                "Web search is off: pass WebSearchTools(BraveSearch(api_key)) or WebSearchTools(SearxNG(url)), "
                "or set BRAVE_SEARCH_API_KEY or SEARXNG_URL."
            )
        if not 1 <= max_results <= 50:
            raise UserError("WebSearchTools: max_results must be from 1 to 50.")
        self.provider = provider
        self.max_results = max_results
        annotations = ToolAnnotations(read_only=True, idempotent=True, timeout=60.0)
        super().__init__([FunctionTool(self.web_search, annotations=annotations)], prefix=prefix)

    async def web_search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """Search the web. Returns results as {title, url, snippet}, best first.

        Args:
            query: What to search for (at most 400 characters).
            limit: Most results wanted.
        """
        query = query.strip() if isinstance(query, str) else ""
        if not query:
            raise ToolError("query is empty: say what to search for.")
        if len(query) > _MAX_QUERY:
            raise ToolError(f"query is {len(query)} characters; at most {_MAX_QUERY}: shorten it.")
        limit = max(1, min(int(limit), self.max_results))
        return (await self.provider.search(query, limit))[:limit]
