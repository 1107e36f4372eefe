-- Templates' records (internal/store/pg_templates.go). The record is kept
-- whole as JSONB, like every other kind; the columns beside it are what
-- queries select, order, count and keep unique by, and every write sets
-- both together.

CREATE TABLE templates (
    id         text COLLATE "C" PRIMARY KEY,
    account    text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    tag        text COLLATE "C" NOT NULL,
    public     boolean NOT NULL,
    size_bytes bigint NOT NULL,
    created_at timestamptz NOT NULL,
    deleted_at timestamptz, -- NULL while the template is live
    template   jsonb NOT NULL
);
-- An account holds one live template of each name:tag; removed ones keep
-- their name until they are purged, so the rule is over live ones only.
CREATE UNIQUE INDEX templates_live_name ON templates (account, name, tag) WHERE deleted_at IS NULL;
-- A create that names a template another account published.
CREATE INDEX templates_public ON templates (name, tag) WHERE public AND deleted_at IS NULL;
