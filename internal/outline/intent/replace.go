package intent

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Replace rewrites text: every match of Find in a bullet's text becomes
// With. Find is literal (case-sensitive), or an RE2 expression when Regex
// ($1 in With is its first group). A literal Find that is one whole tag
// ("#old") or mention ("@alice.example") renames that tag or mention:
// only whole ones match, tags case-insensitively (so "#old" never touches
// "#older"), and the bullet's facets are computed again from its new text,
// as for every text edit.
type Replace struct {
	Find  string `json:"find"`
	With  string `json:"with"`
	Regex bool   `json:"regex,omitempty"`
}

// replacer is a compiled Replace: apply returns the new text and how many
// matches it replaced.
type replacer func(text string) (string, int)

// compile checks r and returns its replacer; what names the argument.
func (r Replace) compile(what string) (replacer, string, error) {
	if r.Find == "" {
		return nil, "", outline.Fail(outline.ErrInvalidInput, "pass the text to find", "%s is empty", what)
	}
	if r.Regex {
		re, err := regexp.Compile(r.Find)
		if err != nil {
			return nil, "", outline.Fail(outline.ErrInvalidInput, "fix the expression (RE2 syntax)", "%s: %v", what, err)
		}
		return func(text string) (string, int) {
			n := len(re.FindAllStringIndex(text, -1))
			if n == 0 {
				return text, 0
			}
			return re.ReplaceAllString(text, r.With), n
		}, "RE2", nil
	}
	if sp := facet.Detect(r.Find); len(sp) == 1 && sp[0].Start == 0 && sp[0].End == len(r.Find) && sp[0].Kind != facet.Link {
		kind, value := sp[0].Kind, sp[0].Value
		return func(text string) (string, int) {
			var b strings.Builder
			n, at := 0, 0
			for _, s := range facet.Detect(text) {
				if s.Kind != kind || !strings.EqualFold(s.Value, value) || s.Start < at {
					continue
				}
				b.WriteString(text[at:s.Start])
				b.WriteString(r.With)
				at = s.End
				n++
			}
			if n == 0 {
				return text, 0
			}
			b.WriteString(text[at:])
			return b.String(), n
		}, "whole " + string(kind), nil
	}
	return func(text string) (string, int) {
		n := strings.Count(text, r.Find)
		if n == 0 {
			return text, 0
		}
		return strings.ReplaceAll(text, r.Find, r.With), n
	}, "literal", nil
}

// maxExamples is how many bullets a replace's note shows before and after.
const maxExamples = 5

// EditWhere edits Node, or every bullet Where selects: the fields of Edit
// that are set, and the text by Replace when it is set. A bullet it does
// not change is not written (and counted).
type EditWhere struct {
	Node    string   `json:",omitempty"`
	Where   *Where   `json:",omitempty"`
	Replace *Replace `json:",omitempty"`
	Edit             // the fields to set (its Node is not used)
}

// Plan implements outline.Intent (an Edit of each bullet changed).
func (e EditWhere) Plan(p *outline.Planner) error {
	var items []*outline.Item
	if e.Where != nil {
		var err error
		if items, err = e.Where.pick(p, "where"); err != nil {
			return err
		}
	} else {
		it, err := p.Node(e.Node)
		if err != nil {
			return err
		}
		items = []*outline.Item{it}
	}
	var rep replacer
	how := ""
	if e.Replace != nil {
		var err error
		if rep, how, err = e.Replace.compile("find"); err != nil {
			return err
		}
	} else if e.Text == nil && e.Layout == nil && e.Display == nil && e.Note == nil {
		return outline.Fail(outline.ErrInvalidInput, "pass text, layout, display, note, or find and replace", "nothing to change")
	}
	changed, matches, unmatched := 0, 0, 0
	var examples []string
	for _, it := range items {
		ed := e.Edit
		ed.Node = it.Key()
		if rep != nil {
			old := it.Str("text")
			if ed.Text != nil {
				old = *ed.Text
			}
			txt, n := rep(old)
			if n == 0 {
				unmatched++
				if ed.Layout == nil && ed.Display == nil && ed.Note == nil && ed.Text == nil {
					continue
				}
			} else {
				matches += n
				ed.Text = &txt
				if len(examples) < maxExamples {
					examples = append(examples, fmt.Sprintf("%s: %q → %q", it.Key(), clipAround(old, e.Replace.Find), clipAround(txt, e.Replace.With)))
				}
			}
		}
		if err := ed.Plan(p); err != nil {
			return err
		}
		changed++
	}
	if rep != nil && e.Where != nil {
		// the summary says it: how, the matches, the bullets changed of
		// those selected
		if len(examples) > 0 {
			r := strings.Join(examples, "; ")
			if changed > len(examples) {
				r += fmt.Sprintf("; … and %d more", changed-len(examples))
			}
			p.Review("%s", r)
		}
		p.Summary("replace %q with %q (%s, %d match(es)) in %d of %d bullet(s) selected by where", e.Replace.Find, e.Replace.With, how, matches, changed, len(items))
		return nil
	}
	if rep != nil {
		s := fmt.Sprintf("replace (%s): %d match(es) in %d bullet(s)", how, matches, changed)
		switch {
		case unmatched > 0 && e.Where == nil:
			s += fmt.Sprintf("; no match in %s", outline.Name(items[0]))
		case unmatched > 0:
			s += fmt.Sprintf("; %d selected bullet(s) have no match", unmatched)
		}
		p.Note("%s", s)
		if len(examples) > 0 {
			r := strings.Join(examples, "; ")
			if changed > len(examples) {
				r += fmt.Sprintf("; … and %d more", changed-len(examples))
			}
			p.Review("%s", r)
		}
	}
	switch {
	case e.Where != nil && rep != nil:
		p.Summary("replace %q with %q in %d of %d bullet(s) selected by where", e.Replace.Find, e.Replace.With, changed, len(items))
	case e.Where != nil:
		p.Summary("update %d bullet(s) selected by where", changed)
	case rep != nil:
		p.Summary("replace %q with %q in %s", e.Replace.Find, e.Replace.With, outline.Name(items[0]))
	}
	return nil
}

// clipAround is s shortened to about 60 characters around the first
// occurrence of near (or its start).
func clipAround(s, near string) string {
	r := []rune(s)
	if len(r) <= 60 {
		return s
	}
	at := 0
	if i := strings.Index(s, near); i > 0 && near != "" {
		at = len([]rune(s[:i]))
	}
	lo := max(0, at-20)
	hi := min(len(r), lo+60)
	out := string(r[lo:hi])
	if lo > 0 {
		out = "…" + out
	}
	if hi < len(r) {
		out += "…"
	}
	return out
}
