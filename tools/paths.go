package tools

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Error paths name the argument the model sent. The engine labels what
// it plans by input position (nodes[0].children[2], its note
// nodes[0].note; within apply_batch, ops[1].nodes[0]); a tool that took
// its bullets another way says where in its own arguments: insert_after
// text= is text (its note note, and so on), markdown= and
// import_outline's content are their input lines, update_node's note is
// note, an op of apply_batch is ops[i].args.….

// inputPos is an input position as the planner labels it, with the field
// after it: nodes[0].children[1].note.text.
var inputPos = regexp.MustCompile(`\bnodes\[\d+\](?:\.children\[\d+\])*(\.note)?((?:\.[A-Za-z]+)*)`)

// opPos is the position of an op of apply_batch, with the path in it.
var opPos = regexp.MustCompile(`\bops\[(\d+)\]((?:\.[A-Za-z]+|\[\d+\])*)`)

// sentPaths is err with the input positions in its message renamed to
// the arguments tool was sent (a); err itself when it is not an engine
// error.
func sentPaths(tool string, a Args, err error) error {
	return withMsg(err, func(msg string) string { return renameIn(msg, tool, a) })
}

// linePaths is err with input positions renamed to the lines of arg they
// came from (lines: input position → line).
func linePaths(err error, arg string, lines map[string]int) error {
	return withMsg(err, func(msg string) string { return linesIn(msg, arg, lines) })
}

func withMsg(err error, f func(string) string) error {
	var oe *outline.Error
	if !errors.As(err, &oe) {
		return err
	}
	c := *oe
	c.Msg = f(c.Msg)
	return &c
}

func renameIn(msg, tool string, a Args) string {
	switch {
	case tool == "apply_batch":
		var ops []struct {
			Tool string `json:"tool"`
			Args Args   `json:"args"`
		}
		if _, err := a.Decode("ops", &ops); err != nil {
			return msg
		}
		return opPos.ReplaceAllStringFunc(msg, func(m string) string {
			s := opPos.FindStringSubmatch(m)
			i, _ := strconv.Atoi(s[1])
			rest := strings.TrimPrefix(s[2], ".")
			if i >= len(ops) || rest == "" {
				return m
			}
			return fmt.Sprintf("ops[%d].args.%s", i, renameIn(rest, ops[i].Tool, ops[i].Args))
		})
	case tool == "insert_after" && a.OptStr("markdown") != nil:
		d, err := markup.Markdown(a.Str("markdown"))
		if err != nil {
			return msg
		}
		return linesIn(msg, "markdown", d.Lines)
	case tool == "insert_after" && a.OptStr("text") != nil:
		return positionsIn(msg, func(pos string, note bool, field string) string {
			switch {
			case note:
				return "note"
			case field == "":
				return "text"
			}
			return field
		})
	case tool == "update_node":
		return strings.ReplaceAll(msg, "note.text", "note")
	}
	return msg
}

// positionsIn rewrites every input position in msg by name (pos, whether
// it is the note, the field path after it: "text").
func positionsIn(msg string, name func(pos string, note bool, field string) string) string {
	return inputPos.ReplaceAllStringFunc(msg, func(m string) string {
		s := inputPos.FindStringSubmatch(m)
		pos := strings.TrimSuffix(strings.TrimSuffix(m, s[2]), s[1])
		return name(pos, s[1] != "", strings.TrimPrefix(s[2], "."))
	})
}

func linesIn(msg, arg string, lines map[string]int) string {
	return positionsIn(msg, func(pos string, note bool, field string) string {
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
