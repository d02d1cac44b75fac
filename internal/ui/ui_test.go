package ui

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

// TestViewsSelfContained: each view is at most MaxBytes, inlines its one
// script and style (their hashes are the CSP's), and names no origin: no
// URL, no external script, style sheet, image, font or frame.
func TestViewsSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)https?://|<link|<iframe|<img|\bsrc\s*=|@import|url\(|//[a-z0-9.-]+\.[a-z]{2,}/`)
	for _, v := range All() {
		if len(v.HTML) > MaxBytes {
			t.Errorf("%s: %d bytes, more than %d", v.Name, len(v.HTML), MaxBytes)
		}
		t.Logf("%s: %d bytes", v.Name, len(v.HTML))
		if m := external.FindString(v.HTML); m != "" {
			t.Errorf("%s names something outside the page: %q", v.Name, m)
		}
		if strings.Count(v.HTML, "<script") != 1 || strings.Count(v.HTML, "<style") != 1 || strings.Contains(v.HTML, "/*CSS*/") || strings.Contains(v.HTML, "/*JS*/") {
			t.Errorf("%s: not one inline script and style", v.Name)
		}
		i, j := strings.Index(v.HTML, "<script>"), strings.Index(v.HTML, "</script>")
		sum := sha256.Sum256([]byte(v.HTML[i+8 : j]))
		if want := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; v.ScriptHash != want || !strings.Contains(v.CSP(), want) {
			t.Errorf("%s: script hash %s, want %s", v.Name, v.ScriptHash, want)
		}
		if !strings.Contains(v.CSP(), "default-src 'none'") || strings.Contains(v.CSP(), "unsafe") {
			t.Errorf("%s: CSP %s", v.Name, v.CSP())
		}
		if ByURI(v.URI) != v || !strings.HasPrefix(v.URI, "ui://") {
			t.Errorf("%s: URI %s", v.Name, v.URI)
		}
		// both themes: the dark palette and the host's theme
		if !strings.Contains(v.HTML, "[data-theme=dark]") || !strings.Contains(v.HTML, "prefers-color-scheme:dark") {
			t.Errorf("%s: no dark theme", v.Name)
		}
	}
	csp := Meta()["ui"].(map[string]any)["csp"].(map[string]any)
	for _, k := range []string{"connectDomains", "resourceDomains", "frameDomains"} {
		if d, ok := csp[k].([]string); !ok || len(d) != 0 {
			t.Errorf("csp %s = %v, want declared and empty", k, csp[k])
		}
	}
}
