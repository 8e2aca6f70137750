"""What the CLI and the service may use of the live view's internals (the picture of a plan and its feed).

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._picture import Outcome as Outcome
from ._picture import outcome_from_json as outcome_from_json
from ._picture import outcome_of as outcome_of
from ._picture import render_picture as render_picture
