-- Named persistent volumes' records (internal/store/pg_volumes.go): the
-- record whole as JSONB, beside the columns queries use. An account holds
-- one volume of each name.

CREATE TABLE volumes (
    id         text COLLATE "C" PRIMARY KEY,
    account    text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    volume     jsonb NOT NULL,
    UNIQUE (account, name)
);
