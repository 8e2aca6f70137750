"""What sibling packages may use of the sandbox's internals (the built-in shell tool runs in its confinement)."""

from ._platform import SHELL_LAUNCHER as SHELL_LAUNCHER
from ._platform import landlock_abi as landlock_abi
from ._platform import prefix_layers as prefix_layers
from ._platform import sandbox_prefix as sandbox_prefix
from ._types import LogBuffer as LogBuffer

__all__ = ("SHELL_LAUNCHER", "LogBuffer", "landlock_abi", "prefix_layers", "sandbox_prefix")
