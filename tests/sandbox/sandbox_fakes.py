"""Fakes shared by the sandbox tests (a tool registry standing in for the executor).

A module of its own, not ``conftest``: ``conftest`` module names clash when several test folders
run in one session (``pytest tests/sandbox tests/builtin``).
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

from toolplan import ToolError, UnknownToolError

HAS_MONTY = importlib.util.find_spec("pydantic_monty") is not None


class FakeTools:
    """A small tool registry standing in for the executor's call_tool."""

    names = ("get_weather", "fail", "meet", "record", "hang", "blob", "cyclic", "deep")

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.records: list[dict[str, Any]] = []
        self.recorded = asyncio.Event()
        self.met = asyncio.Event()
        self.in_flight = 0
        self.max_in_flight = 0
        self.meetings = 0

    async def __call__(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append((name, args))
        if name == "get_weather":
            return {"city": args["city"], "temp": 21, "tags": ["sunny"]}
        if name == "fail":
            raise ToolError("the weather service is down", tool=name)
        if name == "meet":  # returns only once `expect` calls are running at the same time
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.meetings += 1
            if self.meetings >= args["expect"]:
                self.met.set()
            try:
                await asyncio.wait_for(self.met.wait(), timeout=20)
            except TimeoutError:
                raise ToolError("the calls did not run concurrently", tool=name) from None
            finally:
                self.in_flight -= 1
            return args["n"]
        if name == "record":
            self.records.append(args)
            self.recorded.set()
            return "recorded"
        if name == "hang":
            await asyncio.Event().wait()
        if name == "blob":
            return "y" * args["size"]
        if name == "cyclic":  # a buggy tool: a value that contains itself
            loop: list[Any] = []
            loop.append(loop)
            return loop
        if name == "deep":  # a value nested far deeper than json.dumps can encode
            value: list[Any] = []
            for _ in range(100_000):
                value = [value]
            return value
        raise UnknownToolError(name, self.names)
