"""What the live page and the plan pictures share between the CLI and the service (both top layers).

The page (``static/``: HTML, a small hand-written script and style sheet, and the vendored dagre
layout library) follows one execution over the planner service's event JSON; `LiveFeed` makes that
JSON from a local run's events and `LiveServer` serves it for ``toolplan run --ui``. `render_picture`
draws a plan (coloured by outcome when there is one) as SVG, PNG or Mermaid for ``toolplan graph``.
This package imports only the layers below it (``plan``, ``execute``), never the CLI or the service.
"""

from ._assets import ASSETS as ASSETS
from ._assets import PAGE_HEADERS as PAGE_HEADERS
from ._assets import asset as asset
from ._assets import home_page as home_page
from ._assets import page as page
from ._feed import LiveFeed as LiveFeed
from ._feed import graph_view as graph_view
from ._feed import record_of as record_of
from ._server import LiveServer as LiveServer

__all__ = ("ASSETS", "PAGE_HEADERS", "LiveFeed", "LiveServer", "asset", "graph_view", "home_page", "page", "record_of")
