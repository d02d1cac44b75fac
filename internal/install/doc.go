// Package install adds this server to an MCP client's own configuration
// file (Claude Desktop, VS Code, Cursor; Claude Code's project .mcp.json):
// the entry is merged into the file (every other server and key kept, in
// its order, with its values as written), the file it changes is backed up
// first (PATH.bak-TIMESTAMP), and a second run that would change nothing
// changes nothing. Plan computes the change without writing (a dry run
// prints it, Diff), Write makes it. A file it cannot parse is a
// *ParseError and one it cannot (or must not: read-only) write a
// *WriteError; either way nothing is written and no backup is left.
//
// Where the client has a command of its own for this (Claude Code: claude
// mcp add), ClaudeCodeCommand gives it: the client keeps that file itself,
// while it runs.
package install
