-- The event log, the webhooks and their deliveries, and the audit log
-- (internal/store/pg_events.go). Records are kept whole as JSONB; the
-- columns beside them are what queries select and order by.

-- Seqs come from events_seq, taken under a transaction advisory lock
-- ("events"), so that they commit in order: a reader never finds a
-- smaller Seq after a larger one.
CREATE SEQUENCE events_seq;
CREATE TABLE events (
    seq     bigint PRIMARY KEY,
    account text COLLATE "C" NOT NULL,
    at      timestamptz NOT NULL,
    event   jsonb NOT NULL
);
CREATE INDEX events_account ON events (account, seq);
CREATE INDEX events_at ON events (at);

CREATE TABLE webhooks (
    id         text COLLATE "C" PRIMARY KEY,
    account    text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    cursor     bigint NOT NULL, -- the Seq of the last event handled
    webhook    jsonb NOT NULL
);
CREATE INDEX webhooks_account ON webhooks (account);

CREATE TABLE webhook_deliveries (
    id       bigserial PRIMARY KEY,
    webhook  text COLLATE "C" NOT NULL,
    delivery jsonb NOT NULL
);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook, id);

CREATE TABLE audit (
    seq   bigserial PRIMARY KEY,
    at    timestamptz NOT NULL,
    entry jsonb NOT NULL
);
CREATE INDEX audit_at ON audit (at);
