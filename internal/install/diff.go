package install

import (
	"fmt"
	"strings"
)

// Diff is the plan's change as a unified diff of the file's lines (three
// lines of context), "" when nothing changes. A file too large for the
// line-by-line comparison gets its new content whole.
func (p *Plan) Diff() string {
	if !p.Changed {
		return ""
	}
	a, b := lines(string(p.Before)), lines(string(p.After))
	from := p.Path
	if !p.Exists {
		from = "/dev/null"
	}
	head := fmt.Sprintf("--- %s\n+++ %s\n", from, p.Path)
	if len(a)*len(b) > 4_000_000 {
		var s strings.Builder
		s.WriteString(head)
		for _, l := range b {
			s.WriteString("+" + l + "\n")
		}
		return s.String()
	}
	// longest common subsequence, then the edit script from its table
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type edit struct {
		op   byte // ' ', '-', '+'
		line string
		ai   int // a's line number (1-based) at this edit
		bi   int
	}
	var es []edit
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			es = append(es, edit{' ', a[i], i + 1, j + 1})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			// deletions before insertions, as diff(1) shows them
			es = append(es, edit{'-', a[i], i + 1, j + 1})
			i++
		default:
			es = append(es, edit{'+', b[j], i + 1, j + 1})
			j++
		}
	}
	var s strings.Builder
	s.WriteString(head)
	const ctx = 3
	for k := 0; k < len(es); {
		if es[k].op == ' ' {
			k++
			continue
		}
		// a hunk: from ctx lines before this change to ctx lines after the
		// last change that is within 2*ctx of the one before it
		start := max(k-ctx, 0)
		end := k
		for e := k; e < len(es); e++ {
			if es[e].op != ' ' {
				end = e
			} else if e-end > 2*ctx {
				break
			}
		}
		end = min(end+ctx, len(es)-1)
		var ac, bc int
		for _, e := range es[start : end+1] {
			if e.op != '+' {
				ac++
			}
			if e.op != '-' {
				bc++
			}
		}
		as, bs := es[start].ai, es[start].bi
		if ac == 0 {
			as--
		}
		if bc == 0 {
			bs--
		}
		fmt.Fprintf(&s, "@@ -%d,%d +%d,%d @@\n", as, ac, bs, bc)
		for _, e := range es[start : end+1] {
			s.WriteString(string(e.op) + e.line + "\n")
		}
		k = end + 1
	}
	return s.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
