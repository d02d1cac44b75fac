package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/install"
)

// runInstall adds this server to a client's configuration
// (internal/install): the command written is this binary's absolute path
// (os.Executable, or --command) with serve and the serve flags given after
// --, checked here by serve's own flag set.
func runInstall(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "the configuration file to edit instead of the client's own (for Claude Code: a project's .mcp.json)")
	dryRun := fs.Bool("dry-run", false, "print the change as a diff and write nothing")
	name := fs.String("name", "bulleted", "the server's name in the client's configuration")
	command := fs.String("command", "", "the command the client runs (default: this binary's absolute path)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: bulleted-mcp install CLIENT [--config PATH] [--dry-run] [-- SERVE FLAGS]

Adds this server (COMMAND serve [SERVE FLAGS]) to the client's configuration
file, merged with the servers and settings there, after a backup of the file
(PATH.bak-TIMESTAMP). A second run changes nothing. Claude Code keeps its own
configuration: for it the 'claude mcp add' command is printed (with --config,
a project's .mcp.json is edited instead).

Clients:`)
		for _, c := range install.Clients {
			where := "prints the claude mcp add command"
			if p, err := c.DefaultPath(); err == nil {
				where = p
			}
			fmt.Fprintf(fs.Output(), "  %-15s %s\n", c.Name, where)
		}
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "bulleted-mcp install: which client? (bulleted-mcp install --help lists them)")
		return 2
	}
	clientName, rest := fs.Arg(0), fs.Args()[1:]
	// flags may follow the client too; what follows -- is serve's
	if code, ok := parse(fs, rest); !ok {
		return code
	}
	serveArgs := fs.Args()
	if n := len(rest) - len(serveArgs); len(serveArgs) > 0 && (n == 0 || rest[n-1] != "--") {
		fmt.Fprintf(stderr, "bulleted-mcp install: unexpected %q (serve's flags go after --)\n", serveArgs[0])
		return 2
	}
	client, err := install.Lookup(clientName)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp install: %v\n", err)
		return 2
	}
	var flagErrs strings.Builder
	if slices.ContainsFunc(serveArgs, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		flagErrs.WriteString("--help is no flag to run the server with")
	} else if checkServeArgs(serveArgs, &flagErrs) != 0 && flagErrs.Len() == 0 {
		flagErrs.WriteString("they do not parse")
	}
	if flagErrs.Len() > 0 {
		fmt.Fprintf(stderr, "bulleted-mcp install: serve does not take %q: %s\n", strings.Join(serveArgs, " "), firstLine(flagErrs.String()))
		return 2
	}
	if *command == "" {
		if *command, err = os.Executable(); err != nil {
			fmt.Fprintf(stderr, "bulleted-mcp install: this binary's path: %v (name it with --command)\n", err)
			return 1
		}
	}
	if err := install.CheckCommand(*command); err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp install: %v\n", err)
		return 1
	}
	srv := install.Server{Name: *name, Command: *command, Args: append([]string{"serve"}, serveArgs...)}
	if client.OwnCommand && *config == "" {
		fmt.Fprintf(stderr, "%s keeps its own configuration; run:\n", client.Title)
		fmt.Fprintln(stdout, install.ClaudeCodeCommand(srv))
		return 0
	}
	path := *config
	if path == "" {
		if path, err = client.DefaultPath(); err != nil {
			fmt.Fprintf(stderr, "bulleted-mcp install: %v (name the file with --config)\n", err)
			return 1
		}
	}
	plan, err := install.Prepare(client, path, srv)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp install: %v\n", err)
		if pe := (*install.ParseError)(nil); errors.As(err, &pe) && client.Name == "vscode" && *config == "" {
			fmt.Fprintf(stderr, "VS Code can add it itself:\n  %s\n", install.VSCodeAddCommand(srv))
		}
		return 1
	}
	if !plan.Changed {
		fmt.Fprintf(stdout, "%s is already configured in %s (%s); nothing changed\n", srv.Name, plan.Path, client.Title)
		return 0
	}
	if *dryRun {
		fmt.Fprint(stdout, plan.Diff())
		fmt.Fprintf(stderr, "dry run: %s not written\n", plan.Path)
		return 0
	}
	backup, err := plan.Write(time.Now())
	if err != nil {
		// an *install.FileError: it names the file and says nothing was written
		fmt.Fprintf(stderr, "bulleted-mcp install: %v\n", err)
		return 1
	}
	verb := "added " + srv.Name + " to"
	if plan.Replaced != nil {
		verb = fmt.Sprintf("updated %s (it ran %q) in", srv.Name, strings.Join(plan.Replaced, " "))
	}
	fmt.Fprintf(stdout, "%s %s (%s)\n", verb, plan.Path, client.Title)
	if backup != "" {
		fmt.Fprintf(stdout, "backup: %s\n", backup)
	}
	fmt.Fprintf(stdout, "restart %s (or reload its MCP servers) to connect\n", client.Title)
	return 0
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
