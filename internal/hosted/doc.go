// Package hosted is bulleted-mcp as a hosted service: one server for many
// users, several instances behind a load balancer, all shared state in
// PostgreSQL.
//
//   - MCP authorization (spec 2025-06-18, and 2025-11-25 where it differs):
//     protected-resource metadata, 401 with WWW-Authenticate
//     resource_metadata, 403 insufficient_scope, and an authorization server
//     of its own (metadata, dynamic client registration, client ID metadata
//     documents, /authorize with its own per-client consent page, /token with
//     PKCE S256 only, audience-bound opaque tokens stored hashed, rotating
//     refresh tokens with a short grace window, /revoke). MCP clients' tokens
//     are never passed on upstream.
//   - Upstream, each user signs in to their own PDS with AT Protocol OAuth:
//     a confidential client (client metadata and JWKS served here,
//     private_key_jwt) asking for include:app.bulleted.authFull, with the
//     granular fallback. Sessions (tokens and DPoP keys) are stored sealed
//     with a key from the environment, and refreshed by one instance at a
//     time under the session's row lock after re-reading it.
//   - Each request's bearer token resolves to a user; tools run on that
//     user's repository, budget ledger (reservations under an advisory lock,
//     so that all instances together keep to 5,000 points an hour) and
//     operations journal.
//   - Abuse: every request body is size-limited and read within a deadline
//     (408 after it; the deadline is lifted once read, so /mcp streams are
//     not cut); /register, /authorize and /token have per-client-address
//     token buckets (429 with Retry-After; X-Forwarded-For believed only
//     from Config.TrustedProxies); expired requests, codes and tokens are
//     pruned in batches (RunPruner); redirect URIs are https, loopback http
//     or reverse-domain private-use schemes, at most 10.
//   - Following (RunFollowing, follow.go): every user an instance holds is
//     followed through one subscribeRepos connection per PDS host
//     (pds.Hub), so others' edits reach subscribed sessions without a call
//     and reads and writes need no request while it is live; instances
//     NOTIFY each other of their own commits (docs/hosted.md says why not
//     Jetstream, and when it would be). A 2025-11-25 session's resource
//     subscriptions are kept with it in Postgres (server.SubscriptionStore):
//     the instance holding its GET stream loads them and sends their
//     updates, told of changes made on any instance by NOTIFY.
//
// Migrations are embedded and applied at start.
package hosted
