"""Pages of listings: how many rows one gives unless told, and at most (one default, one bound, for all)."""

from __future__ import annotations

from typing import Final

__all__ = ("DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE")

DEFAULT_PAGE_SIZE: Final = 50
"""Rows a listing gives unless told how many: `toolplan.store.Store.list_runs`, the service's listings
(REST ``?limit=``, GraphQL ``first``), the client's ``page_size``, the ``schedule_list`` tool."""

MAX_PAGE_SIZE: Final = 200
"""Most rows a page of the service's listings holds (REST ``?limit=``, GraphQL ``first``)."""
