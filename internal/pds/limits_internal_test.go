package pds

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hanging accepts requests and never answers them (until the client gives
// up); it counts them.
func hanging(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	ch := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		select {
		case <-r.Context().Done():
		case <-ch:
		}
	}))
	t.Cleanup(func() { close(ch); s.Close() })
	return s, &n
}

// noHang fails the test if f does not return within a minute (a guard
// against the test itself hanging, not a timing assertion).
func noHang(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the request hung")
		return nil
	}
}

func TestCallBounds(t *testing.T) {
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"cursor":"`)
		chunk := strings.Repeat("a", 32<<10)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	}))
	defer endless.Close()
	hang, _ := hanging(t)
	cases := []struct {
		name string
		host string
		b    bounds
		want error
	}{
		{"no answer", hang.URL, bounds{timeout: 200 * time.Millisecond, max: MaxJSON}, ErrTimeout},
		{"endless JSON", endless.URL, bounds{timeout: time.Minute, max: 1 << 20}, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out map[string]any
			err := noHang(t, func() error {
				return callWith(context.Background(), NewAPIClient(c.host, nil), c.b, http.MethodGet, "com.atproto.sync.getLatestCommit", nil, nil, &out, nil)
			})
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// The client's own bound covers requests that do not come through call
// (identity resolution, session refresh).
func TestClientBoundsOtherRequests(t *testing.T) {
	hang, _ := hanging(t)
	hc := NewHTTPClient(HTTPConfig{RequestTimeout: 200 * time.Millisecond})
	err := noHang(t, func() error {
		resp, err := hc.Get(hang.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
}

func TestLimitReader(t *testing.T) {
	cases := []struct {
		name string
		in   string
		max  int64
		want string
		err  error
	}{
		{"under", "abc", 4, "abc", nil},
		{"at", "abcd", 4, "abcd", nil},
		{"over", "abcde", 4, "abcd", ErrTooLarge},
		{"empty", "", 0, "", nil},
		{"zero over", "a", 0, "", ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := io.ReadAll(limit(strings.NewReader(c.in), c.max))
			if string(got) != c.want || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
				t.Fatalf("got %q, %v; want %q, %v", got, err, c.want, c.err)
			}
		})
	}
}
