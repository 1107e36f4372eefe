package api

import "time"

// Account owns sandboxes, keys and usage. Only the admin key manages
// accounts.
type Account struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	// TrialHours is the free sandbox time of a trial account (0: not a
	// trial), TrialUsedHours what its sandboxes have run so far.
	TrialHours     float64   `json:"trial_hours,omitempty"`
	TrialUsedHours float64   `json:"trial_used_hours,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// CreateAccountRequest is the body of POST /v1/accounts. Zero values take
// the server's defaults (concurrency 100, not a trial).
type CreateAccountRequest struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency,omitempty"`
	TrialHours  float64 `json:"trial_hours,omitempty"`
}

// AccountList is the body of GET /v1/accounts.
type AccountList struct {
	Accounts []Account `json:"accounts"`
}

// Key is an API key as the API shows it. Secret is set only in the answer
// to its creation: the server keeps only its hash.
type Key struct {
	ID               string    `json:"id"`
	Account          string    `json:"account"`
	Kind             string    `json:"kind"`
	Name             string    `json:"name,omitempty"`
	DailyLimitMicros int64     `json:"daily_limit_micros,omitempty"`
	Parent           string    `json:"parent,omitempty"` // the key that made it (none: the admin key did); its spending counts there too
	CreatedAt        time.Time `json:"created_at"`
	Secret           string    `json:"key,omitempty"`
}

// CreateKeyRequest is the body of POST /v1/keys. Account defaults to the
// caller's; only the admin key names another. Kind is "full" (default) or
// "read_only"; "admin" only by the admin key. A key made by a key with a
// daily limit (its own or one it was made through) gets at most that
// limit: none asked means that limit, more is forbidden. Format is how the
// secret is written: "withruntime" (default, "wr_...") or "e2b" ("e2b_" and
// hex digits, for E2B's SDKs); the key is the same in every other respect.
type CreateKeyRequest struct {
	Account          string `json:"account,omitempty"`
	Kind             string `json:"kind,omitempty"`
	Name             string `json:"name,omitempty"`
	DailyLimitMicros int64  `json:"daily_limit_micros,omitempty"`
	Format           string `json:"format,omitempty"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// UsageRow is one UTC day of one account's key.
type UsageRow struct {
	Day            string  `json:"day"`
	Account        string  `json:"account"`
	KeyID          string  `json:"key_id"`
	SandboxHours   float64 `json:"sandbox_hours"`
	CPUHours       float64 `json:"cpu_hours"`
	MemoryGiBHours float64 `json:"memory_gib_hours"`
	CostMicros     int64   `json:"cost_micros"`
}

// Usage is the body of GET /v1/usage (?account=&key=&from=&to=, days as
// YYYY-MM-DD).
type Usage struct {
	Rows       []UsageRow `json:"rows"`
	CostMicros int64      `json:"cost_micros"`
}

// Trial is the body answering POST /v1/trial: a full key of a new trial
// account.
type Trial struct {
	Account    string  `json:"account"`
	Key        string  `json:"key"`
	TrialHours float64 `json:"trial_hours"`
}
