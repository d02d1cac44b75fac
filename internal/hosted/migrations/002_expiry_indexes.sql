-- The pruner deletes expired rows by expires_at (tokens_expires exists).
CREATE INDEX auth_requests_expires ON auth_requests (expires_at);
CREATE INDEX auth_codes_expires ON auth_codes (expires_at);
