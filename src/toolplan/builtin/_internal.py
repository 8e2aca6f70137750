"""What sibling packages may use of the built-in toolsets' internals."""

# The workspace confinement of FileTools, reused by KnowledgeTools so ingesting a file is as safe as reading one.
from ._paths import Workspace as Workspace
