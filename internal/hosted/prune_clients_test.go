package hosted

import (
	"context"
	"testing"
	"time"
)

// TestPruneUnusedClients: an OAuth client (registered, or a kept client ID
// document) older than ClientUnused that nothing refers to any more is
// deleted with the expired rows, the one whose last token expired in the
// same pass; a young client, and an old one with a live token or a pending
// request, are kept. Before, registered clients were never deleted.
func TestPruneUnusedClients(t *testing.T) {
	e := newEnv(t)
	a := e.start(t, nil)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := a.db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	client := func(id, kind, age string) {
		exec(`INSERT INTO oauth_clients (client_id, kind, metadata, created_at) VALUES ($1, $2, '{}', now() - $3::interval)`, id, kind, age)
	}
	client("old-unused", "dcr", "31 days")
	client("old-cimd-unused", "cimd", "31 days")
	client("old-expired-token", "dcr", "40 days") // its last token expired: pruned in the same pass
	client("old-live-token", "dcr", "90 days")
	client("old-pending-request", "dcr", "31 days")
	client("young-unused", "dcr", "29 days") // registered, not yet used: kept
	for i, c := range []struct{ client, expires string }{{"old-expired-token", "-1 hour"}, {"old-live-token", "1 day"}} {
		exec(`INSERT INTO tokens (hash, kind, client_id, did, scope, resource, family, expires_at)
			VALUES ($1, 'refresh', $2, 'did:plc:x', 's', 'r', 'f', now() + $3::interval)`, []byte{byte(i)}, c.client, c.expires)
	}
	exec(`INSERT INTO auth_requests (id, client_id, redirect_uri, code_challenge, scope, resource, csrf_hash, expires_at)
		VALUES ('ar-live', 'old-pending-request', 'http://127.0.0.1/cb', 'c', 's', 'r', '\x00', now() + interval '10 minutes')`)
	st, err := a.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Clients != 3 || st.Tokens != 1 {
		t.Errorf("pruned %+v, want 3 clients and 1 token", st)
	}
	rows, err := a.db.Query(ctx, "SELECT client_id FROM oauth_clients ORDER BY client_id")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		left = append(left, id)
	}
	if got, want := len(left), 3; got != want || left[0] != "old-live-token" || left[1] != "old-pending-request" || left[2] != "young-unused" {
		t.Fatalf("clients left %v, want old-live-token, old-pending-request, young-unused", left)
	}
	// a shorter period, as configured: the young client goes too
	b := e.start(t, func(c *Config) { c.ClientUnused = 24 * time.Hour })
	if st, err := b.Prune(ctx); err != nil || st.Clients != 1 {
		t.Fatalf("with ClientUnused 24h: %+v %v, want the 29-day-old client pruned", st, err)
	}
}
