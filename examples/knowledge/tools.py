"""Tools of the knowledge example: a knowledge base in a SQLite file, with the local CPU model.

``KNOWLEDGE_DB`` picks the database (default ``knowledge.db`` in the current directory); the
``docs/`` folder beside this file is the workspace ``knowledge_ingest`` may read files from.

    toolplan run examples/knowledge/plan.json --tools examples/knowledge/tools.py:TOOLS
"""

from __future__ import annotations

import os
from pathlib import Path

from toolplan.knowledge import KnowledgeBase, KnowledgeTools, LocalEmbeddings

knowledge = KnowledgeBase(os.environ.get("KNOWLEDGE_DB", "sqlite:///knowledge.db"), LocalEmbeddings(), namespace="demo")
TOOLS = [KnowledgeTools(knowledge, workspace=Path(__file__).parent / "docs")]
