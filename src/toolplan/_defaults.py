"""Defaults shared by layers that cannot import each other: pages of listings and store leases (one home each)."""

from __future__ import annotations

from typing import Final

__all__ = ("DEFAULT_LEASE", "DEFAULT_PAGE_SIZE", "MAX_LEASE", "MAX_PAGE_SIZE", "MIN_LEASE")

DEFAULT_PAGE_SIZE: Final = 50
"""Rows a listing gives unless told how many: `toolplan.store.Store.list_runs`, the service's listings
(REST ``?limit=``, GraphQL ``first``), the client's ``page_size``, the ``schedule_list`` tool."""

MAX_PAGE_SIZE: Final = 200
"""Most rows a page of the service's listings holds (REST ``?limit=``, GraphQL ``first``)."""

DEFAULT_LEASE: Final = 30.0
"""Seconds a process holds a run it runs without renewing its claim (renewed every third of it):
`toolplan.store.open_store`, ``TOOLPLAN_LEASE`` for the CLI."""

MIN_LEASE: Final = 0.1
"""The shortest lease a store accepts, in seconds."""

MAX_LEASE: Final = 86_400.0
"""The longest lease a store accepts, in seconds (a day)."""
