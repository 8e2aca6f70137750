"""web_search against a stand-in SearxNG on 127.0.0.1: python examples/websearch/local_searxng.py

Point SearxNG(url) at your own instance (with `formats: [html, json]` in its settings.yml), or use
BraveSearch(api_key) for the Brave Search API; the tool and its results are the same.
"""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from toolplan import execute_plan
from toolplan.builtin import SearxNG, WebSearchTools


class FakeSearxNG(BaseHTTPRequestHandler):
    """Answers /search?q=...&format=json in SearxNG's JSON shape."""

    def do_GET(self) -> None:
        body = json.dumps({"query": "toolplan", "results": [
            {"url": "https://example.org/plans", "title": "Tool plans", "content": "Run many <b>tool</b> calls."},
            {"url": "https://example.org/dags", "title": "DAGs", "content": "Dependency graphs."},
        ]}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeSearxNG)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tools = WebSearchTools(SearxNG(f"http://127.0.0.1:{server.server_address[1]}"))
        plan = {"steps": [{"id": "q", "tool": "web_search", "arguments": {"query": "toolplan", "limit": 2}}]}
        result = await execute_plan(plan, [tools])
        for hit in result.steps["q"].output:
            print(hit["title"], "-", hit["url"], "-", hit["snippet"])
    finally:
        server.shutdown()


asyncio.run(main())
