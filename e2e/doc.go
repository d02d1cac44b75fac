// Package e2e holds the end-to-end tests that run real third-party peers
// against the built binary: the official MCP TypeScript SDK client
// (client.mjs) driving `bulleted-mcp serve` over stdio, on the embedded store
// and on the reference PDS (pds.mjs); and the official MCP conformance suite
// (@modelcontextprotocol/conformance) driving `bulleted-mcp serve --http` and
// the hosted server (conformance_test.go, conformance-baseline.yml); and
// browser tests (apps_test.go): headless Debian Chromium, driven by
// playwright-core, loads the MCP Apps views in a host page built on the
// official AppBridge (apps.mjs, apps-host.html) and /view on `serve --http`
// (view.mjs); browser.sh installs the chromium package when it is missing
// and fails when it cannot. The
// Node.js parts are pinned by package-lock.json and installed by setup.sh on
// first use; nothing is fetched when the tests run.
package e2e
