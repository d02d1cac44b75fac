-- The resource subscriptions of the MCP sessions (resources/subscribe,
-- protocols before 2026-07-28), kept with the session so that the instance
-- holding its GET stream sends their updates, whichever instance served
-- the subscribe; at most server.MaxSubscriptions a session. They end with
-- the session (deleted with it, or when its client deletes it). rev is
-- the revision of the outline the session was told of (when it
-- subscribed, or when a GET stream that held it closed): an instance that
-- loads the subscription from a newer outline tells the session once.
CREATE TABLE mcp_subscriptions (
    session    text NOT NULL REFERENCES mcp_sessions (id) ON DELETE CASCADE,
    uri        text NOT NULL,
    rev        text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session, uri)
);
