-- The /view sign-ins: each view cookie names one row, checked on every
-- request, so that a sign-in ends at once when its row goes (signed out,
-- expired) or when the access token it was exchanged from is revoked
-- (token_hash; NULL for a sign-in in the browser itself).
CREATE TABLE view_sessions (
    id         text PRIMARY KEY,
    did        text NOT NULL,
    scope      text NOT NULL,
    token_hash bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX view_sessions_expires ON view_sessions (expires_at);

-- An authorization request may be a browser's sign-in to /view (view):
-- no MCP client, no redirect of its own.
ALTER TABLE auth_requests ALTER COLUMN client_id DROP NOT NULL;
ALTER TABLE auth_requests ADD COLUMN view boolean NOT NULL DEFAULT false;
