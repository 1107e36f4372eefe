package sandbox

import "github.com/withruntime/withruntime/internal/envname"

// EnvName reports whether name can name a variable of a sandbox's
// environment: letters, digits and '_', not starting with a digit. Env
// relies on it (WITHRUNTIME_ENV_KEYS joins the names with commas). The rule
// is internal/envname's, the one api.EnvName answers with too.
func EnvName(name string) bool { return envname.Valid(name) }
