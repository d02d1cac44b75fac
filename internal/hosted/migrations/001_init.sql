-- MCP clients: registered dynamically (kind dcr) or known by their client ID
-- metadata document (kind cimd, refreshed when stale).
CREATE TABLE oauth_clients (
    client_id   text PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('dcr', 'cimd')),
    secret_hash bytea,
    metadata    jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    fetched_at  timestamptz NOT NULL DEFAULT now()
);

-- Authorization requests between /authorize and the upstream callback (any
-- instance may serve either). upstream holds indigo's pending request
-- (PKCE verifier, DPoP key), sealed.
CREATE TABLE auth_requests (
    id             text PRIMARY KEY,
    client_id      text NOT NULL REFERENCES oauth_clients ON DELETE CASCADE,
    redirect_uri   text NOT NULL,
    state          text NOT NULL DEFAULT '',
    code_challenge text NOT NULL,
    scope          text NOT NULL,
    resource       text NOT NULL,
    csrf_hash      bytea NOT NULL,
    upstream_state text UNIQUE,
    upstream       bytea,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL
);

-- Authorization codes, stored hashed; single use.
CREATE TABLE auth_codes (
    code_hash      bytea PRIMARY KEY,
    client_id      text NOT NULL REFERENCES oauth_clients ON DELETE CASCADE,
    redirect_uri   text NOT NULL,
    code_challenge text NOT NULL,
    scope          text NOT NULL,
    resource       text NOT NULL,
    did            text NOT NULL,
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz
);

-- Access and refresh tokens, stored hashed, bound to a resource (audience).
-- A refresh token is rotated on use; its family is revoked when a rotated
-- one comes back after the grace window.
CREATE TABLE tokens (
    hash       bytea PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('access', 'refresh')),
    client_id  text NOT NULL REFERENCES oauth_clients ON DELETE CASCADE,
    did        text NOT NULL,
    scope      text NOT NULL,
    resource   text NOT NULL,
    family     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    rotated_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX tokens_family ON tokens (family);
CREATE INDEX tokens_expires ON tokens (expires_at);

-- Upstream AT Protocol OAuth sessions, one per identity: tokens and DPoP
-- key sealed (AES-256-GCM, key from the environment).
CREATE TABLE atproto_sessions (
    did          text PRIMARY KEY,
    session_id   text NOT NULL,
    client_id    text NOT NULL,
    callback     text NOT NULL,
    confidential boolean NOT NULL,
    sealed       bytea NOT NULL,
    version      bigint NOT NULL DEFAULT 1,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Keys of the server itself (the upstream client's signing key), sealed.
CREATE TABLE server_keys (
    name   text PRIMARY KEY,
    sealed bytea NOT NULL
);

-- The write budget per identity: points spent, reservations held, pauses
-- asked for by the PDS (429).
CREATE TABLE budget_spent (
    id     bigserial PRIMARY KEY,
    did    text NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    points integer NOT NULL
);
CREATE INDEX budget_spent_did_at ON budget_spent (did, at);
CREATE TABLE budget_reserved (
    id         text PRIMARY KEY,
    did        text NOT NULL,
    points     integer NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX budget_reserved_did ON budget_reserved (did);
CREATE TABLE budget_pause (
    did   text PRIMARY KEY,
    until timestamptz NOT NULL
);

-- The operations and undo journal: one row per operation (the engine's
-- operation record).
CREATE TABLE operations (
    did        text NOT NULL,
    id         text NOT NULL,
    body       bytea NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (did, id)
);
