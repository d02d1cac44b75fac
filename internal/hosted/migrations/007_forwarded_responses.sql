-- A client's response forwarded to the instance whose call waits for it
-- when it is too large for a NOTIFY payload (8000 bytes): kept here, the
-- NOTIFY naming its row; every instance reads it (the one that waits takes
-- it), and the pruner deletes it after a while.
CREATE TABLE mcp_forwarded (
    id         bigserial PRIMARY KEY,
    session    text NOT NULL,
    msg        bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mcp_forwarded_created ON mcp_forwarded (created_at);
CREATE INDEX mcp_forwarded_session ON mcp_forwarded (session, created_at);
