package tools

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Error paths name the argument the model sent. The engine labels what
// it plans by input position (nodes[0].children[2], its note
// nodes[0].note); a tool that took its bullets another way says where in
// its own arguments: insert_after text= is text (its note note, and so
// on), markdown= and import_outline's content are their input lines,
// update_node's note is note.

// inputPos is an input position as the planner labels it, with the field
// after it: nodes[0].children[1].note.text.
var inputPos = regexp.MustCompile(`\bnodes\[\d+\](?:\.children\[\d+\])*(\.note)?((?:\.[A-Za-z]+)*)`)

// renamed is err with every input position in its message rewritten by
// name (pos, whether it is the note, the field path after it: ".text");
// err itself when it is not an engine error.
func renamed(err error, name func(pos string, note bool, field string) string) error {
	var oe *outline.Error
	if !errors.As(err, &oe) {
		return err
	}
	c := *oe
	c.Msg = inputPos.ReplaceAllStringFunc(c.Msg, func(m string) string {
		s := inputPos.FindStringSubmatch(m)
		pos := strings.TrimSuffix(strings.TrimSuffix(m, s[2]), s[1])
		return name(pos, s[1] != "", strings.TrimPrefix(s[2], "."))
	})
	return &c
}

// sentPaths renames the input positions of a write tool's error to the
// arguments a sent.
func sentPaths(tool string, a Args, err error) error {
	switch {
	case tool == "insert_after" && a.OptStr("markdown") != nil:
		d, perr := markup.Markdown(a.Str("markdown"))
		if perr != nil {
			return err
		}
		return linePaths(err, "markdown", d.Lines)
	case tool == "insert_after" && a.OptStr("text") != nil:
		return renamed(err, func(pos string, note bool, field string) string {
			switch {
			case note:
				return "note"
			case field == "":
				return "text"
			}
			return field
		})
	case tool == "update_node":
		var oe *outline.Error
		if errors.As(err, &oe) && strings.Contains(oe.Msg, "note.text") {
			c := *oe
			c.Msg = strings.ReplaceAll(c.Msg, "note.text", "note")
			return &c
		}
	}
	return err
}

// linePaths renames input positions to the lines of arg they came from
// (lines: input position → line).
func linePaths(err error, arg string, lines map[string]int) error {
	return renamed(err, func(pos string, note bool, field string) string {
		l, ok := lines[pos]
		if !ok {
			return pos
		}
		switch {
		case note:
			return fmt.Sprintf("%s line %d (its note)", arg, l)
		case field == "" || field == "text":
			return fmt.Sprintf("%s line %d", arg, l)
		}
		return fmt.Sprintf("%s line %d (%s)", arg, l, field)
	})
}
