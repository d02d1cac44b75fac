package tools

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Args are a call's arguments, read leniently: arrays and objects may arrive
// as JSON strings, numbers and booleans as strings.
type Args map[string]any

func (a Args) Str(k string) string {
	switch v := a[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// OptStr returns nil when k is absent.
func (a Args) OptStr(k string) *string {
	if _, ok := a[k]; !ok || a[k] == nil {
		return nil
	}
	s := a.Str(k)
	return &s
}

func (a Args) Bool(k string, def bool) (bool, error) {
	switch v := a[k].(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return false, fmt.Errorf("%s must be true or false, got %q", k, v)
		}
		return b, nil
	}
	return false, fmt.Errorf("%s must be true or false", k)
}

func (a Args) Int(k string, def int) (int, error) {
	switch v := a[k].(type) {
	case nil:
		return def, nil
	case float64:
		return int(v), nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("%s must be a whole number, got %q", k, v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s must be a whole number", k)
}

// Decode reads k into out, accepting a JSON string in place of the value.
func (a Args) Decode(k string, out any) (bool, error) {
	v, ok := a[k]
	if !ok || v == nil {
		return false, nil
	}
	var raw []byte
	if s, isStr := v.(string); isStr && (strings.HasPrefix(strings.TrimSpace(s), "[") || strings.HasPrefix(strings.TrimSpace(s), "{")) {
		raw = []byte(s)
	} else {
		raw, _ = json.Marshal(v)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, fmt.Errorf("%s: %v", k, err)
	}
	return true, nil
}

// Strings reads a list of strings (or one string, or a JSON string of a list).
func (a Args) Strings(k string) ([]string, bool, error) {
	if s, ok := a[k].(string); ok && !strings.HasPrefix(strings.TrimSpace(s), "[") {
		return []string{s}, true, nil
	}
	var out []string
	ok, err := a.Decode(k, &out)
	return out, ok, err
}
