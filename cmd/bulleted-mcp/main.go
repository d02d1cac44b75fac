// Command bulleted-mcp is an MCP server that reads and safely restructures
// Bulleted outlines (app.bulleted.* records in the user's AT Protocol
// repository).
package main

import (
	"fmt"
	"io"
	"os"
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands []command

func init() {
	commands = []command{
		{"serve", "run the MCP server (stdio by default, --http for streamable HTTP)", runServe},
		{"login", "sign in to your PDS with OAuth (the session is kept in the data directory)", runLogin},
		{"logout", "revoke and delete the OAuth session", runLogout},
		{"call", "call one tool from the shell: call TOOL [JSON]", runCall},
		{"demo", "seed a throwaway store with the guide's example and show it", runDemo},
		{"validate", "validate record files against the app.bulleted lexicons", runValidate},
		{"export", "write the outline as car, json, markdown or opml (no row cap)", runExport},
		{"import", "replace the embedded repository with a CAR file", runImport},
		{"install", "add this server to a client: install claude-desktop|claude-code|vscode|cursor", runInstall},
		{"version", "print the module version and the commit it was built from", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "bulleted-mcp: an MCP server for Bulleted outlines.")
	fmt.Fprintln(w, "\nUsage: bulleted-mcp COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'bulleted-mcp COMMAND --help' for a command's flags.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "bulleted-mcp: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}
