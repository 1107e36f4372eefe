package api

import "github.com/withruntime/withruntime/internal/envname"

// EnvName reports whether name can name an environment variable of a
// sandbox (its create-time env, an exec's env, a secret): letters, digits
// and '_', not starting with a digit. The rule is internal/envname's, which
// the domain's sandbox.EnvName answers with too.
func EnvName(name string) bool { return envname.Valid(name) }
