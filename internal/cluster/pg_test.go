package cluster_test

import (
	"testing"

	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/testenv"
)

// openPostgres opens a fresh database of the test server at base, dropped
// when the test ends.
func openPostgres(t *testing.T, base string) store.Store {
	t.Helper()
	u := testenv.FreshPostgres(t, "withruntime_cluster_")
	st, err := store.OpenPostgres(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
