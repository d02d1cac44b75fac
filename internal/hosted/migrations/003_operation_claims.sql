-- The operations journal is read and written by the engines directly (no
-- operation files): version counts every change of a row, so that an
-- instance re-reads only the rows that changed since it last read them.
ALTER TABLE operations ADD COLUMN version bigint NOT NULL DEFAULT 0;

-- Who is committing an operation right now: a lease held by one instance,
-- renewed while it commits, and given up when it is done (or run out when
-- the instance died). A row may name an operation not recorded yet (the
-- claim is taken before the first record).
CREATE TABLE operation_claims (
    did        text NOT NULL,
    id         text NOT NULL,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (did, id)
);
CREATE INDEX operation_claims_expires ON operation_claims (expires_at);
