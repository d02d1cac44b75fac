package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestValidateExitCodes(t *testing.T) {
	cases := []struct {
		name string
		args []string
		in   string
		code int
		out  string
	}{
		{"examples ok", []string{"validate", "../../examples/records/groceries.json"}, "", 0, "groceries.json: ok"},
		{"invalid", []string{"validate", "../../examples/records/invalid.json"}, "", 1, "invalid.json[0]: sortKey: 513 bytes, the limit is 512"},
		{"stdin one record", []string{"validate", "-"}, `{"$type":"app.bulleted.node","text":"x","sortKey":"a","createdAt":"2026-07-30T09:30:00.000Z"}`, 0, "-: ok"},
		{"stdin bad json", []string{"validate", "-"}, `{`, 2, ""},
		{"missing file", []string{"validate", "/does/not/exist"}, "", 2, ""},
		{"no args", []string{"validate"}, "", 2, ""},
		{"help", []string{"validate", "--help"}, "", 0, ""},
		{"unknown command", []string{"frobnicate"}, "", 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(c.args, strings.NewReader(c.in), &out, &errb)
			if code != c.code {
				t.Fatalf("exit %d want %d; stdout=%s stderr=%s", code, c.code, out.String(), errb.String())
			}
			if c.out != "" && !strings.Contains(out.String(), c.out) {
				t.Fatalf("stdout %q lacks %q", out.String(), c.out)
			}
		})
	}
}

// TestValidateOpenSetNote: a comment policy with a rule Bulleted does not
// know is valid (the allow list is an open set; it used to be refused),
// and stderr says the rule grants nothing.
func TestValidateOpenSetNote(t *testing.T) {
	var out, errb bytes.Buffer
	in := `{"$type":"app.bulleted.commentPolicy","allow":["everyone"],"createdAt":"2026-07-30T09:30:00.000Z"}`
	if code := run([]string{"validate", "-"}, strings.NewReader(in), &out, &errb); code != 0 {
		t.Fatalf("exit %d; stdout=%s stderr=%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "-: ok") || !strings.Contains(errb.String(), "-: note: allow[0]: ") || !strings.Contains(errb.String(), "grants nothing") {
		t.Fatalf("stdout=%q stderr=%q", out.String(), errb.String())
	}
}
