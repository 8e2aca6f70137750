"""The one check of "a finite number" that limits, budget windows, cost functions and declared budgets share."""

from __future__ import annotations

import math
from typing import Any

__all__ = ("finite_number",)


def finite_number(value: Any) -> bool:
    """A number a float can hold: not NaN, not infinite, not a bool, not an int too big for a float.

    (``math.isfinite`` raises `OverflowError` on such an int: hostile input must get an answer, not that.)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
