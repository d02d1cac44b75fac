// Package ui holds the MCP Apps views (the io.modelcontextprotocol/ui
// extension, protocol 2026-01-26): self-contained HTML pages, embedded in
// the binary, that a host renders in a sandboxed iframe for a tool's
// result. The outline view shows a read_outline or search result as a
// collapsible outline; the diff view shows a write tool's result (a dry
// run's added, moved, changed and deleted bullets with Apply, which calls
// the same tool with plan=ID through the host; an applied one's Undo). Each
// page inlines its CSS and script (the sources under src/, assembled once),
// loads nothing from any origin, and declares so in its resource _meta
// (an empty CSP domain list); /view serves the same pages with a CSP header
// of their script and style hashes.
package ui
