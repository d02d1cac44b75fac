// Command cmd writes zz_kinds.go from errors.go in the current directory
// (package outline's; go generate runs it there).
package main

import (
	"fmt"
	"os"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/internal/kindgen"
)

func main() {
	src, err := os.ReadFile("errors.go")
	if err == nil {
		var out []byte
		if out, err = kindgen.Generate(src); err == nil {
			err = os.WriteFile("zz_kinds.go", out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kindgen:", err)
		os.Exit(1)
	}
}
