"""The ``toolplan`` command line: run, validate and graph plans, and a demo.

Importing this package imports typer and rich; ``import toolplan`` does not.
"""

from __future__ import annotations

from ._app import app as app
from ._app import main as main

__all__ = ("app", "main")
