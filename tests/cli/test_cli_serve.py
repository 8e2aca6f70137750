"""``toolplan serve``: what can be checked is checked before the banner, and the defaults are the service's."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import socket
from pathlib import Path
from typing import Any

import pytest
from cli_support import Cli
from typer.testing import CliRunner

pytest.importorskip("fastapi")

from toolplan.cli import app
from toolplan.service import ServiceConfig


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.txt"
    path.write_text("a-test-key\n", encoding="utf-8")
    return path


def test_a_busy_port_is_an_error_before_the_banner(cli: Cli, tools_file: Path, key_file: Path, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = cli(
            "serve", "--tools", str(tools_file), "--db", str(tmp_path / "s.db"), "--api-key-file", str(key_file),
            "--port", str(port),
        )  # fmt: skip
    assert done.code == 2, done.stderr
    assert done.stderr.startswith(f"Error: Cannot listen on 127.0.0.1:{port}: ") and "--port" in done.stderr
    assert "toolplan service on" not in done.stdout and "Traceback" not in done.stderr


def test_a_model_without_its_api_key_is_refused_at_start(
    cli: Cli, tools_file: Path, key_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    done = cli(
        "serve", "--tools", str(tools_file), "--db", str(tmp_path / "s.db"), "--api-key-file", str(key_file),
        "--model", "openai:gpt-4o-mini", "--port", "0",
    )  # fmt: skip
    assert done.code == 2, done.stderr
    assert done.stderr.startswith("Error: --model 'openai:gpt-4o-mini': ") and "OPENAI_API_KEY" in done.stderr
    assert "toolplan service on" not in done.stdout


def test_serve_takes_its_defaults_from_the_service(
    tools_file: Path, key_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolplan.cli._serve
    import toolplan.service

    seen: dict[str, Any] = {}
    real = toolplan.service.serve

    @functools.wraps(real)  # the same signature: its defaults are the service's
    async def fake_serve(store: Any, tools: Any, **options: Any) -> None:
        seen.update(options)

    monkeypatch.setattr(toolplan.service, "serve", fake_serve)
    monkeypatch.setattr(toolplan.cli._serve, "_check_port", lambda host, port: None)  # 8000 may be taken here
    args = ["serve", "--tools", str(tools_file), "--db", str(tmp_path / "s.db"), "--api-key-file", str(key_file)]
    result = CliRunner().invoke(app, [*args, "--no-scheduler"])
    assert result.exit_code == 0, result.output
    where = inspect.signature(real).parameters
    assert (seen["host"], seen["port"]) == (where["host"].default, where["port"].default)
    assert seen["config"] == ServiceConfig()
    result = CliRunner().invoke(app, [*args, "--no-scheduler", "--slots", "3", "--max-active-per-key", "5"])
    assert result.exit_code == 0, result.output
    assert seen["config"] == dataclasses.replace(ServiceConfig(), slots=3, max_active_per_key=5)


def test_serve_takes_model_spend_caps_and_prices(
    tools_file: Path, key_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolplan.cli._serve
    import toolplan.service
    from toolplan import ModelPrice, SpendLimits
    from toolplan.execute import WindowLimits

    seen: dict[str, Any] = {}

    @functools.wraps(toolplan.service.serve)  # the same signature: serve reads its defaults from it
    async def fake_serve(store: Any, tools: Any, **options: Any) -> None:
        seen.update(options)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setattr(toolplan.service, "serve", fake_serve)
    monkeypatch.setattr(toolplan.cli._serve, "_check_port", lambda host, port: None)
    prices = tmp_path / "prices.json"
    prices.write_text('{"gpt-4o": {"input": 2.5, "output": 10}}', encoding="utf-8")
    args = [
        "serve", "--tools", str(tools_file), "--db", str(tmp_path / "s.db"), "--api-key-file", str(key_file),
        "--no-scheduler", "--model", "openai:gpt-4o-mini", "--prices", str(prices),
    ]  # fmt: skip
    result = CliRunner().invoke(
        app,
        [*args, "--price", "gpt-4o-mini=0.15,0.6,0.075", "--max-total-tokens", "9000", "--max-money", "0.5",
         "--key-budget-tokens", "100000", "--key-budget-money", "3", "--key-budget-period", "86400"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    config = seen["config"]
    assert config.spend == SpendLimits(
        max_total_tokens=9000,
        max_money=0.5,
        prices={
            "gpt-4o": ModelPrice(input=2.5, output=10.0),
            "gpt-4o-mini": ModelPrice(input=0.15, output=0.6, cached_input=0.075),
        },
    )
    assert config.key_budget == WindowLimits(period=86400, max_total_tokens=100_000, max_money=3.0)
    bad = CliRunner().invoke(app, [*args, "--price", "gpt-4o-mini=cheap,0.6"])
    assert bad.exit_code == 2 and "--price 'gpt-4o-mini=cheap,0.6': 'cheap' is not a number." in bad.output
    unpriced = CliRunner().invoke(app, [*args[:-2], "--key-budget-money", "3"])
    assert unpriced.exit_code == 2 and "--key-budget-money needs the model's price" in unpriced.output
