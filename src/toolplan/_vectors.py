"""The one check of an embedder's answer that the knowledge base and skill search share."""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ("MAX_DIMENSIONS", "check_vectors")

MAX_DIMENSIONS = 65_536  # numbers in one vector: far above any embedding model, far below a memory bomb


def check_vectors(vectors: Any, count: int, *, source: str = "The embedder") -> list[list[float]]:
    """``vectors`` as lists of floats if they are one vector per text; else one `ValueError` saying what is wrong.

    A usable answer is a sequence of ``count`` vectors (lists, tuples or NumPy arrays), each of 1 to
    `MAX_DIMENSIONS` finite numbers (not bools, strings or objects; not an int too big for a float),
    all of one length. Anything else, however odd (ragged, nested, a dict, a generator that raises),
    ends here as that one error rather than as whatever it would break further on.
    """
    problem = _problem(vectors, count)
    if isinstance(problem, str):
        raise ValueError(
            f"{source} returned unusable vectors for {count} text(s): {problem}. It must return one non-empty "
            f"vector of finite numbers per text (at most {MAX_DIMENSIONS}), all of one length."
        )
    return problem


def _problem(vectors: Any, count: int) -> list[list[float]] | str:
    if hasattr(vectors, "tolist") and not isinstance(vectors, list | tuple):  # a NumPy array
        vectors = vectors.tolist()
    if not isinstance(vectors, list | tuple):
        return f"a {type(vectors).__name__}, not a list of vectors"
    if len(vectors) != count:
        return f"{len(vectors)} vector(s)"
    out: list[list[float]] = []
    for i, vector in enumerate(vectors):
        if hasattr(vector, "tolist") and not isinstance(vector, list | tuple):
            vector = vector.tolist()
        if not isinstance(vector, list | tuple):
            return f"vector {i} is a {type(vector).__name__}, not a list of numbers"
        if not vector:
            return f"vector {i} is empty"
        if len(vector) > MAX_DIMENSIONS:
            return f"vector {i} has {len(vector)} numbers"
        if out and len(vector) != len(out[0]):
            return f"vector {i} has {len(vector)} numbers but vector 0 has {len(out[0])}"
        row: list[float] = []
        for x in vector:
            if isinstance(x, bool) or not isinstance(x, numbers.Real):
                return f"vector {i} is not all finite numbers (it holds a {type(x).__name__})"
            try:
                value = float(x)
            except (OverflowError, TypeError, ValueError):
                value = math.inf
            if not math.isfinite(value):
                return f"vector {i} is not all finite numbers ({str(x)[:40]})"
            row.append(value)
        out.append(row)
    return out
