#!/usr/bin/env bash
# Runs every benchmark in release mode, with the peers each issue names measured in the same
# run: a Jupyter kernel (ipykernel + jupyter_client, installed into .bench-venv), ripgrep, and the
# MCP Python SDK (.test-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .bench-venv/bin/python ]; then
  python3 -m venv .bench-venv
fi
.bench-venv/bin/python -c 'import jupyter_client, ipykernel' 2>/dev/null \
  || .bench-venv/bin/pip install --quiet ipykernel jupyter_client
if ! .test-venv/bin/python -c 'import mcp.server.mcpserver' >/dev/null 2>&1; then
  # benches/mcp.rs times the official MCP Python SDK client and fixture server.
  python3 -m venv .test-venv
  .test-venv/bin/pip install --quiet 'mcp==2.3.0'
fi
if ! command -v rg >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq ripgrep) >/dev/null
fi
cargo bench --bench runtime -- --jupyter-python "$PWD/.bench-venv/bin/python" "$@"
cargo bench --bench catalog
for extra in benches/*.rs; do
  name=$(basename "$extra" .rs)
  case "$name" in runtime|catalog) continue ;; esac
  cargo bench --bench "$name"
done
