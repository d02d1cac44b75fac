-- Any instance serves any request: the MCP sessions (protocols before
-- 2026-07-28) with the initialize request that started them (replayed by
-- an instance that adopts the session) and the revision each was last told
-- of; a session belongs to the user who started it.
CREATE TABLE mcp_sessions (
    id         text PRIMARY KEY,
    did        text NOT NULL,
    init       bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    used_at    timestamptz NOT NULL DEFAULT now(),
    ended_at   timestamptz,
    why        text,
    seen_did   text,
    seen_rev   text
);
CREATE INDEX mcp_sessions_used ON mcp_sessions (used_at);

-- Plans kept by dry runs (and held for a person's confirmation): taken
-- once, by the user who made them, on whichever instance gets the call.
CREATE TABLE plans (
    id         text PRIMARY KEY,
    did        text NOT NULL,
    body       bytea NOT NULL,
    made_at    timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX plans_did ON plans (did, made_at);
CREATE INDEX plans_expires ON plans (expires_at);

-- The operation a reservation pays for: a resume on another instance takes
-- over the reservation of the instance that stopped (not held twice).
ALTER TABLE budget_reserved ADD COLUMN op text;
CREATE INDEX budget_reserved_op ON budget_reserved (did, op);
