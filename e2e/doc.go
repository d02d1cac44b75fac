// Package e2e holds the end-to-end tests that run real third-party peers
// against the built binary: the official MCP TypeScript SDK client
// (client.mjs) driving `bulleted-mcp serve` over stdio, on the embedded store
// and on the reference PDS (pds.mjs); and the official MCP conformance suite
// (@modelcontextprotocol/conformance) driving `bulleted-mcp serve --http` and
// the hosted server (conformance_test.go, conformance-baseline.yml). The
// Node.js parts are pinned by package-lock.json and installed by setup.sh on
// first use; nothing is fetched when the tests run.
package e2e
