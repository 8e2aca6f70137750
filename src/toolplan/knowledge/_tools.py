"""`KnowledgeTools`: a knowledge base as tools a model can call (ingest, search, remember, forget)."""

from __future__ import annotations

import os
from typing import Any, Literal

from .._errors import ToolError, UserError
from ..builtin._internal import Workspace  # FileTools' confinement: ingesting a file is as safe as reading one
from ..tools import FunctionTool, ToolAnnotations, Toolset
from ._base import KnowledgeBase

__all__ = ("KnowledgeTools",)

_SEARCH = ToolAnnotations(read_only=True, idempotent=True, timeout=60.0)
_INGEST = ToolAnnotations(idempotent=True, timeout=600.0)  # the same text twice adds nothing
_REMEMBER = ToolAnnotations(idempotent=True, timeout=60.0)
_FORGET = ToolAnnotations(destructive=True, idempotent=True, timeout=60.0)


class KnowledgeTools(Toolset):
    """A `KnowledgeBase` as four tools, bound to one namespace (the model cannot reach another).

    Functions: ``knowledge_search`` (read-only), ``knowledge_ingest`` and ``remember`` (idempotent),
    ``forget`` (destructive; left out with ``read_only=True``). ``knowledge_ingest`` reads files only
    when a ``workspace`` directory is given, with the confinement of `FileTools`.

    Args:
        knowledge: The knowledge base.
        namespace: The namespace the tools use (default: the knowledge base's).
        workspace: A directory ``knowledge_ingest`` may read files from (``path=...``).
        read_only: Offer only ``knowledge_search``.
        prefix: Put in front of every function name (see `Toolset`).
    """

    def __init__(
        self,
        knowledge: KnowledgeBase,
        *,
        namespace: str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        read_only: bool = False,
        prefix: str = "",
    ) -> None:
        self.knowledge = knowledge
        self.namespace = knowledge.namespace if namespace is None else knowledge._namespace(namespace, error=UserError)
        self.workspace = Workspace(workspace, tool="knowledge_ingest") if workspace is not None else None
        if self.workspace is not None and not os.path.isdir(self.workspace.root):
            raise UserError(f"The workspace {os.fspath(workspace or '')!r} is not a directory.")
        functions: list[FunctionTool[Any]] = [FunctionTool(self.knowledge_search, annotations=_SEARCH)]
        if not read_only:
            functions += [
                FunctionTool(self.knowledge_ingest, annotations=_INGEST),
                FunctionTool(self.remember, annotations=_REMEMBER),
                FunctionTool(self.forget, annotations=_FORGET),
            ]
        super().__init__(functions, prefix=prefix)

    async def knowledge_search(
        self,
        query: str,
        k: int = 5,
        filter: dict[str, Any] | None = None,
        mode: Literal["hybrid", "vector", "lexical"] = "hybrid",
    ) -> list[dict[str, Any]]:
        """Search the knowledge base (documents and memories) by meaning and words; best results first.

        Each result has the chunk's text (content), its source, metadata and score.

        Args:
            query: What to look for, in words.
            k: How many results to return.
            filter: Metadata to match, e.g. {"tags": "travel"}, {"kind": "memory"} or {"source": ["a.md", "b.md"]}.
            mode: 'hybrid' (meaning and words, the default), 'vector' (meaning only) or 'lexical' (words only).
        """
        hits = await self.knowledge.search(query, k=k, filter=filter, mode=mode, namespace=self.namespace)
        return [hit.to_dict() for hit in hits]

    async def knowledge_ingest(
        self,
        text: str | None = None,
        path: str | None = None,
        source: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Add a document to the knowledge base: it is cut into chunks, embedded and stored.

        Ingesting the same text under the same source again changes nothing; a new text under a
        known source replaces it.

        Args:
            text: The document's text (or give path).
            path: A UTF-8 text file of the workspace to ingest instead of text; it is the source by default.
            source: Where the text comes from (a file name, URL or title), shown with search results.
            metadata: Extra fields stored with the document and usable in search filters.
        """
        if (text is None) == (path is None):
            raise ToolError("Give either text or path (a file of the workspace), not both or neither.")
        if path is not None:
            text = self._read(path)
            source = source or path
        assert text is not None
        result = await self.knowledge.ingest(text, source=source, metadata=metadata, namespace=self.namespace)
        return result.to_dict()

    def _read(self, path: str) -> str:
        ws = self.workspace
        if ws is None:
            raise ToolError("This knowledge base reads no files: pass the document's text instead of path.")
        limit = self.knowledge.limits.max_text_chars
        parts = ws.parts(path)
        fd, st = ws.open_file(parts, os.O_RDONLY)
        try:
            if st.st_size > limit * 4:
                raise ws.error(f"{ws.show(parts)!r} is {st.st_size} bytes; the limit is {limit} characters.")
            data = os.pread(fd, limit * 4 + 1, 0)
        finally:
            os.close(fd)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ws.error(f"{ws.show(parts)!r} is not UTF-8 text; only text files can be ingested.") from None

    async def remember(self, text: str, tags: list[str] | None = None) -> dict[str, Any]:
        """Remember a fact for later conversations; recall it with knowledge_search.

        Args:
            text: The fact, in a sentence or two.
            tags: Short labels to find it by, e.g. ["preferences"].
        """
        result = await self.knowledge.remember(text, tags=tags or (), namespace=self.namespace)
        return result.to_dict()

    async def forget(self, source: str | None = None, id: str | None = None) -> dict[str, Any]:
        """Delete a document or memory (every chunk of a source) or one chunk (by id).

        Args:
            source: The source to delete, as shown in search results.
            id: One chunk's id, as shown in search results.
        """
        deleted = await self.knowledge.forget(source=source, id=id, namespace=self.namespace)
        return {"deleted": deleted}
