package main

import (
	"fmt"
	"io"
)

func notYet(name string) func([]string, io.Reader, io.Writer, io.Writer) int {
	return func(_ []string, _ io.Reader, _, stderr io.Writer) int {
		fmt.Fprintf(stderr, "bulleted-mcp %s: not available in this build yet\n", name)
		return 2
	}
}

var (
	runServe  = notYet("serve")
	runCall   = notYet("call")
	runDemo   = notYet("demo")
	runExport = notYet("export")
	runImport = notYet("import")
)
