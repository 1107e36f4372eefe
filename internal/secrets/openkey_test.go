package secrets

import (
	"bytes"
	"context"
	"testing"

	"github.com/withruntime/withruntime/internal/store/storetest"
)

// Two vaults of one key (two nodes of one installation) share their
// secrets' placeholders and each opens what the other sealed; a key of the
// wrong size is refused.
func TestOpenKey(t *testing.T) {
	st := storetest.OpenBolt(t)
	defer st.Close()
	key := bytes.Repeat([]byte{7}, KeySize)
	a, err := OpenKey(key, st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenKey(key, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.Set(ctx, "acct", "TOKEN", "api.example.com", testValue); err != nil {
		t.Fatal(err)
	}
	if pa, pb := a.Placeholder("acct", "TOKEN"), b.Placeholder("acct", "TOKEN"); pa != pb {
		t.Fatalf("got placeholders %q and %q, want one", pa, pb)
	}
	got, err := b.ForAccount("acct")
	if err != nil || len(got) != 1 || got[0].Value != testValue {
		t.Fatalf("got %+v %v, want the other vault's secret opened", got, err)
	}
	if _, err := OpenKey(key[:16], st); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
}
