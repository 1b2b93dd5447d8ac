-- +goose Up

-- The web UI's sign-ins, kept server-side: the browser holds only a random secret whose SHA-256
-- is the key here, so that a sign-out or an administrator's revocation (deleting the row) ends
-- the session at once on every instance, and a cookie copied before is refused after.
CREATE TABLE ui_sessions (
    secret_hash  bytea       NOT NULL,
    id           uuid        NOT NULL,
    principal    text        NOT NULL,
    display_name text        NOT NULL,
    method       text        NOT NULL,
    subject      text        NOT NULL DEFAULT '',
    role         text        NOT NULL,
    payload      boolean     NOT NULL,
    id_token     text        NOT NULL DEFAULT '',
    user_agent   text        NOT NULL DEFAULT '',
    remote_addr  text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    CONSTRAINT ui_sessions_pkey PRIMARY KEY (secret_hash),
    CONSTRAINT ui_sessions_id_key UNIQUE (id),
    CONSTRAINT ui_sessions_secret_hash_check CHECK (octet_length(secret_hash) = 32),
    CONSTRAINT ui_sessions_expiry_check CHECK (expires_at > created_at)
);
COMMENT ON TABLE ui_sessions IS 'signed-in sessions of the web UI; a row deleted is a session ended';
COMMENT ON COLUMN ui_sessions.secret_hash IS 'SHA-256 of the random secret in the browser''s session cookie';
COMMENT ON COLUMN ui_sessions.id IS 'public id of the session, for the administrators'' list and revocation';
COMMENT ON COLUMN ui_sessions.principal IS 'audit name of the signed-in principal (token:, proxy: or oidc: prefix)';
COMMENT ON COLUMN ui_sessions.display_name IS 'name shown to the user';
COMMENT ON COLUMN ui_sessions.method IS 'how the user signed in: token or oidc';
COMMENT ON COLUMN ui_sessions.subject IS 'OpenID subject of an oidc session';
COMMENT ON COLUMN ui_sessions.role IS 'role at sign-in: viewer, operator or admin';
COMMENT ON COLUMN ui_sessions.payload IS 'whether the principal may read payload bytes';
COMMENT ON COLUMN ui_sessions.id_token IS 'the OpenID provider''s ID token, sent back as id_token_hint at sign-out';
COMMENT ON COLUMN ui_sessions.last_seen_at IS 'last request of the session (updated at most once a minute)';
COMMENT ON COLUMN ui_sessions.expires_at IS 'the session ends then, whatever happens';
CREATE INDEX ui_sessions_expires_at_idx ON ui_sessions (expires_at);

-- +goose Down
DROP TABLE ui_sessions;
