"""What sibling packages may use of the sandbox's internals (the built-in shell tool runs in its confinement)."""

from ._bounds import DataError as DataError
from ._bounds import DataTooLarge as DataTooLarge
from ._bounds import check_data as check_data
from ._bounds import loads as loads
from ._calls import call_problem as call_problem
from ._calls import serve_call as serve_call
from ._calls import unserialisable as unserialisable
from ._platform import SHELL_LAUNCHER as SHELL_LAUNCHER
from ._platform import landlock_abi as landlock_abi
from ._platform import prefix_layers as prefix_layers
from ._platform import sandbox_prefix as sandbox_prefix
from ._protocol import to_jsonable as to_jsonable
from ._types import LogBuffer as LogBuffer
