"""``python -m toolplan.cli``: the same as the ``toolplan`` command."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    main()
