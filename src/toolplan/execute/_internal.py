"""What sibling packages may use of the engine's internals: the journal protocol, result helpers, the run API.

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._api import run_compiled as run_compiled
from ._journal import check_run_id as check_run_id
from ._result import cap_text as cap_text
from ._share import symmetric as symmetric
from ._window import window_refusal as window_refusal
