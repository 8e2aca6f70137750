"""Run one plan on a Ray cluster: ``python examples/ray/run_on_ray.py [ADDRESS]``.

Without ADDRESS (and without ``RAY_ADDRESS`` set) it starts a local cluster with 2 CPUs and stops it
at the end; with one (``auto``, ``10.0.0.5:6379``, ``ray://head:10001``) it joins that cluster.
Needs ``pip install "toolplan[ray]"``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from toolplan import execute_plan_sync
from toolplan.backends import RayBackend
from tools import TOOLS


def plan(report: str) -> dict[str, object]:
    return {
        "steps": [
            {"id": "ray", "tool": "fetch_page", "arguments": {"topic": "ray"}},
            {"id": "tp", "tool": "fetch_page", "arguments": {"topic": "toolplan"}},
            {"id": "n_ray", "tool": "word_count", "arguments": {"text": "$ref:ray.text"}},
            {"id": "n_tp", "tool": "word_count", "arguments": {"text": "$ref:tp.text"}},
            {"id": "save", "tool": "save_report", "arguments": {"path": report, "counts": ["$ref:n_ray", "$ref:n_tp"]}},
        ],
        "output_steps": ["n_ray", "n_tp", "save"],
    }


def main(address: str | None) -> None:
    report = str(Path(tempfile.mkdtemp()) / "report.txt")
    # num_cpus sizes a local cluster; it is left out when joining one (ADDRESS, or RAY_ADDRESS set).
    with RayBackend(address, cpu_tools=["word_count"], init_options={"num_cpus": 2}) as backend:
        result = execute_plan_sync(plan(report), TOOLS, backend=backend, run_id="ray-example")
    print(json.dumps({"status": result.status, "outputs": result.outputs}, sort_keys=True))
    print(Path(report).read_text(encoding="utf-8").strip())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
