"""What sibling packages may use of the engine's internals: the journal protocol, result helpers, the run API.

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._api import run_compiled as run_compiled
from ._choice import forgetful as forgetful
from ._choice import learns as learns
from ._choice import set_default_policy as set_default_policy
from ._gate import ApprovalGate as ApprovalGate
from ._gate import check_answers as check_answers
from ._gate import resumed as resumed
from ._journal import StoredRun as StoredRun
from ._journal import check_run_id as check_run_id
from ._result import cap_text as cap_text
from ._run import PlanRun as PlanRun
from ._share import symmetric as symmetric
from ._step import set_retry_backoff as set_retry_backoff
from ._streaming import StreamingPlan as StreamingPlan
from ._window import spend_refusal as spend_refusal
from ._window import window_refusal as window_refusal
