#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests compare against (ripgrep,
# pytest, npm, the MCP Python SDK in .test-venv), then runs
# every unit and integration test (Python behaviour runs in the real embedded interpreter).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v rg >/dev/null 2>&1; then
  # grep is checked against ripgrep's own answers on a real tree.
  (apt-get update -qq && apt-get install -y -qq ripgrep) >/dev/null
fi
if ! command -v tmux >/dev/null 2>&1; then
  # The interactive `vis chat` is driven in tmux as a person would use it.
  (apt-get update -qq && apt-get install -y -qq tmux) >/dev/null
fi
if ! command -v npm >/dev/null 2>&1; then
  # The `tests` extension is checked running a real `npm test` (node's test runner).
  (apt-get update -qq && apt-get install -y -qq nodejs npm) >/dev/null
fi
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  # The web view of `vis serve` is checked in a real headless Chromium over WebDriver.
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null
fi
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  # The PostgreSQL store is tested against a real server: tests/it/support/postgres.rs starts
  # a throwaway cluster in a temp dir (as the `postgres` user the package creates, when run as
  # root) and stops it at exit.
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null
fi
if ! python3 -c 'import pytest' >/dev/null 2>&1; then
  # The `tests` extension is checked running a real pytest suite.
  python3 -m pip install --quiet pytest
fi
if ! .test-venv/bin/python -c 'import mcp.server.mcpserver' >/dev/null 2>&1; then
  # MCP both ways is tested against the official MCP Python SDK: as the client driving
  # `vis mcp`, and as the fixture servers (tests/fixtures/mcp) that become namespaces.
  python3 -m venv .test-venv
  .test-venv/bin/pip install --quiet 'mcp==2.3.0'
fi
if ! .test-venv/bin/python -m mypy --version >/dev/null 2>&1; then
  # The prelude package (python/vis, its `_native.pyi` stubs) and the bundled extensions are
  # checked with mypy --strict.
  .test-venv/bin/pip install --quiet 'mypy==2.4.1'
fi
(cd python && ../.test-venv/bin/python -m mypy --strict --cache-dir=/dev/null -p vis)
MYPYPATH=python .test-venv/bin/python -m mypy --strict --cache-dir=/dev/null extensions/*.py
# Lints first (Cargo.toml's [lints]: no unwrap/expect/print outside the CLI and tests).
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked "$@"
