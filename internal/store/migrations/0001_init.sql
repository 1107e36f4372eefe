-- The first schema of the PostgreSQL store (internal/store/pg*.go).
--
-- Each value is kept whole as JSONB, as the embedded store keeps it, so that
-- both round-trip the same Go types; the columns beside it are what queries
-- select, order and lock by. Text that is compared or ordered is COLLATE "C":
-- byte order, as the embedded store sorts its keys, whatever the database's
-- locale.

CREATE TABLE sandboxes (
    id         text COLLATE "C" PRIMARY KEY,
    account    text COLLATE "C" NOT NULL,
    node       text COLLATE "C" NOT NULL,
    state      text NOT NULL,
    version    bigint NOT NULL,
    created_at timestamptz NOT NULL,
    record     jsonb NOT NULL
);
-- The records that have not ended are the few that the reaper, the meter
-- and admission read all the time.
CREATE INDEX sandboxes_live ON sandboxes (account, state) WHERE state <> 'ended';
CREATE INDEX sandboxes_node ON sandboxes (node, state) WHERE state <> 'ended';
CREATE INDEX sandboxes_account ON sandboxes (account, created_at);

-- Keys that work. hash is SHA-256 of the secret: two keys never share one.
CREATE TABLE keys (
    id         text COLLATE "C" PRIMARY KEY,
    account    text COLLATE "C" NOT NULL,
    hash       bytea NOT NULL,
    created_at timestamptz NOT NULL,
    key        jsonb NOT NULL
);
CREATE UNIQUE INDEX keys_hash ON keys (hash);
CREATE INDEX keys_account ON keys (account, created_at);

-- Removed keys, without their hash: what they spent still counts against
-- the limits of the keys they were made through.
CREATE TABLE removed_keys (
    id         text COLLATE "C" PRIMARY KEY,
    account    text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    key        jsonb NOT NULL
);
CREATE INDEX removed_keys_account ON removed_keys (account, created_at);

CREATE TABLE accounts (
    id         text COLLATE "C" PRIMARY KEY,
    name       text COLLATE "C", -- NULL when the account has none
    created_at timestamptz NOT NULL,
    account    jsonb NOT NULL
);
CREATE UNIQUE INDEX accounts_name ON accounts (name) WHERE name IS NOT NULL;

-- The usage ledger: one summed row per UTC day, account and key.
CREATE TABLE usage_ledger (
    day           text COLLATE "C" NOT NULL,
    account       text COLLATE "C" NOT NULL,
    key_id        text COLLATE "C" NOT NULL,
    alive_ms      bigint NOT NULL,
    memory_mib_ms bigint NOT NULL,
    cpu_ns        bigint NOT NULL,
    cost_nanos    bigint NOT NULL,
    PRIMARY KEY (day, account, key_id)
);
CREATE INDEX usage_ledger_account ON usage_ledger (account, day);

CREATE TABLE secrets (
    account text COLLATE "C" NOT NULL,
    name    text COLLATE "C" NOT NULL,
    secret  jsonb NOT NULL,
    PRIMARY KEY (account, name)
);

-- The node registry. Epoch, lost and the lease's times are the columns'
-- (the times from the server's clock); node holds the rest of the entry.
CREATE TABLE nodes (
    id            text COLLATE "C" PRIMARY KEY,
    epoch         bigint NOT NULL,
    lost          boolean NOT NULL,
    registered_at timestamptz NOT NULL,
    renewed_at    timestamptz NOT NULL,
    lease_ends_at timestamptz NOT NULL,
    node          jsonb NOT NULL
);

-- Values made once per installation (InitValue).
CREATE TABLE store_values (
    name  text COLLATE "C" PRIMARY KEY,
    value bytea NOT NULL
);
