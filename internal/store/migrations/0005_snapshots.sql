-- The sandboxes' snapshots (internal/store/pg_snapshots.go). Records are
-- kept whole as JSONB; the columns beside them are what queries select
-- and order by.
CREATE TABLE snapshots (
    id         text COLLATE "C" PRIMARY KEY,
    account    text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    snapshot   jsonb NOT NULL
);
CREATE INDEX snapshots_account ON snapshots (account, created_at);
CREATE INDEX snapshots_expires ON snapshots (expires_at);
