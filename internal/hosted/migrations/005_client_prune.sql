-- The pruner deletes OAuth clients nothing refers to any more (no pending
-- request, code or token) once they are old enough: the references are
-- looked up by client.
CREATE INDEX auth_requests_client ON auth_requests (client_id);
CREATE INDEX auth_codes_client ON auth_codes (client_id);
CREATE INDEX tokens_client ON tokens (client_id);
CREATE INDEX oauth_clients_created ON oauth_clients (created_at);
