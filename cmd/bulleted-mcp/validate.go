package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

func runValidate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	collection := fs.String("collection", "", "collection NSID to validate against (default: each record's $type)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: bulleted-mcp validate [--collection NSID] FILE...

Validates app.bulleted.* records against the embedded lexicons and the
record-level rules. Each FILE holds one record or a JSON array of records;
"-" reads standard input. A record may also be wrapped as {"uri", "value"}
(as getRecord and listRecords return it), which enables the rules that need
the record's own URI (co-keyed notes, root iff key is not self).

Prints "FILE: ok", or one line per problem: FILE[INDEX]: PATH: MESSAGE.
Values of open sets (layout, display, comment-policy rules) that Bulleted
does not know are valid; each gets a line on stderr: FILE: note: PATH: ….
Exit status: 0 all valid, 1 any invalid, 2 usage error or unreadable input.

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	v := validate.Default()
	status := 0
	for _, name := range fs.Args() {
		var raw []byte
		var err error
		if name == "-" {
			raw, err = io.ReadAll(stdin)
		} else {
			raw, err = os.ReadFile(name)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
		recs, isArray, err := splitRecords(raw)
		if err != nil {
			fmt.Fprintf(stderr, "%s: not JSON: %v\n", name, err)
			return 2
		}
		bad := false
		for i, r := range recs {
			label := name
			if isArray {
				label = fmt.Sprintf("%s[%d]", name, i)
			}
			body, self := unwrap(r)
			notes, err := v.JSONNotes(body, *collection, self)
			for _, n := range notes {
				// an open-set value this version does not know: valid
				fmt.Fprintf(stderr, "%s: note: %s\n", label, n)
			}
			if err == nil {
				continue
			}
			bad = true
			var ve *validate.Error
			if errors.As(err, &ve) {
				for _, p := range ve.Problems {
					fmt.Fprintf(stdout, "%s: %s\n", label, p)
				}
			} else {
				fmt.Fprintf(stdout, "%s: %v\n", label, err)
			}
		}
		if bad {
			status = 1
		} else {
			fmt.Fprintf(stdout, "%s: ok\n", name)
		}
	}
	return status
}

func splitRecords(raw []byte) ([]json.RawMessage, bool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var arr []json.RawMessage
		if err := json.Unmarshal(raw, &arr); err != nil {
			return nil, true, err
		}
		return arr, true, nil
	}
	var one json.RawMessage
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, false, err
	}
	return []json.RawMessage{one}, false, nil
}

// unwrap accepts {"uri": …, "value": {…}} as returned by getRecord/listRecords.
func unwrap(r json.RawMessage) (json.RawMessage, *syntax.ATURI) {
	var w struct {
		URI   string          `json:"uri"`
		Value json.RawMessage `json:"value"`
		Type  string          `json:"$type"`
	}
	if json.Unmarshal(r, &w) != nil || w.Type != "" || w.Value == nil || w.URI == "" {
		return r, nil
	}
	u, err := syntax.ParseATURI(w.URI)
	if err != nil {
		return w.Value, nil
	}
	return w.Value, &u
}
