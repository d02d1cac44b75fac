// Package server assembles the MCP server: the tools of package tools over
// one outline engine, the embedded instructions, and the transports (stdio,
// and streamable HTTP on /mcp with an optional bearer token).
package server
