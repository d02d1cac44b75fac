package tools

import (
	"fmt"
	"strings"
)

// Markdown is the tool table of docs/tools.md, generated from the tool
// definitions.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| tool | read-only | destructive | what it does |\n|---|---|---|---|\n")
	for _, t := range All() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", t.Name, yes(t.Ann.ReadOnly), yes(t.Ann.Destructive), strings.ReplaceAll(t.Description, "|", "\\|"))
	}
	return b.String()
}

func yes(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}
