"""Shared helpers: machine facts, package versions, medians, interleaved repetitions, results files."""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).parent / "results"
PACKAGES = (
    "toolplan",
    "pydantic",
    "langgraph",
    "langchain-core",
    "dask",
    "tiktoken",
    "llama_cpp_python",
    "dbos",
    "sqlalchemy",
    "psycopg",
)


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def machine() -> dict[str, Any]:
    mem_gb: float | None = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        mem_gb = round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gb": mem_gb,
        "git_commit": _git_commit(),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def installed(module: str) -> bool:
    """True when an optional contender's package can be imported (LangGraph, Dask)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a module blocked in sys.modules
        return False


OPTIONAL_CONTENDERS = {
    "langgraph": "langgraph",
    "dask": "dask",
    "dbos": "dbos",
    "dbos_sync": "dbos",
}  # contender -> the module it needs
INSTALL_HINT = 'pip install -e ".[bench]"'


def not_installed(contenders: Sequence[str]) -> list[str]:
    """The optional contenders among ``contenders`` whose package is missing: reported as skipped."""
    return [c for c in contenders if c in OPTIONAL_CONTENDERS and not installed(OPTIONAL_CONTENDERS[c])]


def header(benchmark: str, *, quick: bool, argv: Sequence[str], **settings: Any) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "quick": quick,
        "command": "python -m bench " + " ".join(argv),
        "machine": machine(),
        "versions": versions(),
        "settings": settings,
    }


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summarize(xs: Sequence[float]) -> dict[str, Any]:
    """Median, min, max and the raw samples."""
    return {"median": median(xs), "min": min(xs), "max": max(xs), "n": len(xs), "samples": list(xs)}


def rotate(items: Sequence[str], k: int) -> list[str]:
    """The contenders in a different order each repetition (interleaving, so drift hits all alike)."""
    k %= max(len(items), 1)
    return [*items[k:], *items[:k]]


def settle() -> None:
    """Collect garbage before a timed run so one contender's garbage is not billed to the next."""
    gc.collect()


def now() -> float:
    return time.perf_counter()


def write(name: str, data: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    return path


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
