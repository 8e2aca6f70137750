"""Public surface of toolplan.sandbox: exports, optional dependency, limits validation, layers."""

from __future__ import annotations

import sys

import pytest
from sandbox_fakes import FakeTools

import toolplan.sandbox
from toolplan import OptionalDependencyError
from toolplan.sandbox import CodeLimits, CodeRunner, MontyRunner, SubprocessRunner
from toolplan.sandbox._types import LogBuffer


def test_all_is_importable() -> None:
    for name in toolplan.sandbox.__all__:
        assert hasattr(toolplan.sandbox, name), name


def test_runners_satisfy_the_protocol() -> None:
    assert isinstance(SubprocessRunner(), CodeRunner)
    assert isinstance(MontyRunner(), CodeRunner)


async def test_missing_monty_names_the_extra(monkeypatch: pytest.MonkeyPatch, tools: FakeTools) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_monty", None)
    with pytest.raises(OptionalDependencyError, match=r'pip install "toolplan\[monty\]"'):
        await MontyRunner().run("set_result(1)", call_tool=tools)


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="wall_time"):
        CodeLimits(wall_time=0)
    assert CodeLimits(wall_time=5).effective_cpu_time == 5


def test_log_buffer_keeps_head_and_tail() -> None:
    logs = LogBuffer(100)
    for i in range(1000):
        logs.write(f"{i}\n".encode())
    text = logs.text()
    assert text.startswith("0\n1\n") and text.endswith("998\n999\n")
    assert "bytes of output dropped" in text


async def test_layers_are_reported(tools: FakeTools) -> None:
    runner = SubprocessRunner()
    await runner.run("set_result(1)", call_tool=tools)
    assert {"rlimits", "audit_hook"} <= set(runner.layers)
    if sys.platform == "linux":
        print("active layers:", runner.layers)
