"""Shared helpers of the CLI tests (a uniquely named module; conftest holds the fixtures)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

TOOLS_SOURCE = '''
from __future__ import annotations

import asyncio
import os
from typing import Any

from helper_module import double  # a sibling module: imported functions are not tools

from toolplan import ToolError, tool


def _record(name: str) -> None:
    path = os.environ.get("TOOLPLAN_TEST_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(name + "\\n")


def add(a: int, b: int) -> int:
    """Add two numbers."""
    _record("add")
    return a + b


def echo(value: Any) -> Any:
    """Return the value."""
    _record("echo")
    return value


@tool
def fail(message: str) -> str:
    """Always fail with a business error."""
    _record("fail")
    raise ToolError(message)


async def hang(label: str) -> str:
    """Never finish (until cancelled)."""
    _record("hang")
    await asyncio.Event().wait()
    return label


def noisy(text: str) -> str:
    """Print to stdout, then return the text."""
    _record("noisy")
    print("noise from a tool")
    return text


ALL = [add, echo, fail]
BY_NAME = {"plus": add, "boom": fail}
NOT_TOOLS = 42
'''


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


Cli = Callable[..., Result]


WritePlan = Callable[..., Path]
Calls = Callable[[], list[str]]
