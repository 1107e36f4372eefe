package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

func TestCreateAccount(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		if err := st.CreateAccount(ctx, Account{ID: "acme", Name: "acme", CreatedAt: t0}); err != nil {
			t.Fatalf("CreateAccount: %v", err)
		}
		if err := st.PutAccount(ctx, Account{ID: "legacy", CreatedAt: t0.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			a    Account
		}{
			{"same id and name", Account{ID: "acme", Name: "acme", Concurrency: 9}},
			{"same id", Account{ID: "acme", Name: "acme2", Concurrency: 9}},
			{"same name", Account{ID: "acme3", Name: "acme", Concurrency: 9}},
			{"id of a put account", Account{ID: "legacy", Concurrency: 9}},
		} {
			err := st.CreateAccount(ctx, tc.a)
			if k := sandbox.KindOf(err); k != sandbox.KindConflict {
				t.Errorf("%s: got %v, want conflict", tc.name, err)
			}
		}
		// Accounts without a name do not clash on it.
		if err := st.CreateAccount(ctx, Account{ID: "x", CreatedAt: t0.Add(2 * time.Second)}); err != nil {
			t.Fatalf("CreateAccount x: %v", err)
		}
		if err := st.CreateAccount(ctx, Account{ID: "y", CreatedAt: t0.Add(3 * time.Second)}); err != nil {
			t.Fatalf("CreateAccount y: %v", err)
		}
		all, err := st.ListAccounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range all {
			ids = append(ids, a.ID)
			if a.Concurrency != 0 {
				t.Errorf("account %s was overwritten: concurrency %d", a.ID, a.Concurrency)
			}
		}
		if want := []string{"acme", "legacy", "x", "y"}; !reflect.DeepEqual(ids, want) {
			t.Fatalf("accounts: got %v, want %v", ids, want)
		}
		if err := st.CreateAccount(ctx, Account{Name: "noid"}); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("account without id: got %v, want invalid_request", err)
		}
	})
}

// TestCreateAccountRace: of many creations of one name at once, one wins.
func TestCreateAccountRace(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		const tries = 8
		errs := make([]error, tries)
		var wg sync.WaitGroup
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Distinct ids, one name: only the name can clash.
				errs[i] = st.CreateAccount(context.Background(), Account{ID: fmt.Sprintf("id%d", i), Name: "same", CreatedAt: t0})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case sandbox.KindOf(err) != sandbox.KindConflict:
				t.Errorf("CreateAccount: got %v, want nil or conflict", err)
			}
		}
		if won != 1 {
			t.Fatalf("created: got %d, want 1", won)
		}
	})
}

func testKey(id, account string, kind KeyKind, at time.Duration) Key {
	return Key{ID: id, Account: account, Kind: kind, Hash: hashOf("secret-" + id), CreatedAt: t0.Add(at)}
}

func keyIDs(keys []Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.ID)
	}
	return out
}

var errRefused = sandbox.Errorf(sandbox.KindForbidden, "refused by the check")

func TestPutKeyIf(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		for _, k := range []Key{testKey("k1", "acme", KeyFull, 0), testKey("k2", "other", KeyFull, time.Second)} {
			if err := st.PutKey(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		var seen []string
		err := st.PutKeyIf(ctx, testKey("k3", "acme", KeyReadOnly, 2*time.Second), func(keys []Key) error {
			seen = keyIDs(keys)
			return nil
		})
		if err != nil {
			t.Fatalf("PutKeyIf: %v", err)
		}
		if want := []string{"k1"}; !reflect.DeepEqual(seen, want) {
			t.Fatalf("check saw %v, want %v (the account's keys before the insert)", seen, want)
		}
		if k, err := st.KeyByHash(ctx, hashOf("secret-k3")); err != nil || k.ID != "k3" {
			t.Fatalf("accepted key: got %v, %v", k, err)
		}

		// A check's error comes back as is and nothing is written.
		err = st.PutKeyIf(ctx, testKey("k4", "acme", KeyFull, 3*time.Second), func(keys []Key) error {
			seen = keyIDs(keys)
			return errRefused
		})
		if err != errRefused {
			t.Fatalf("refused PutKeyIf: got %v, want the check's error", err)
		}
		if want := []string{"k1", "k3"}; !reflect.DeepEqual(seen, want) {
			t.Fatalf("check saw %v, want %v", seen, want)
		}
		if _, err := st.KeyByHash(ctx, hashOf("secret-k4")); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("refused key by hash: got %v, want not_found", err)
		}
		keys, err := st.ListKeys(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"k1", "k3"}; !reflect.DeepEqual(keyIDs(keys), want) {
			t.Fatalf("keys after a refusal: got %v, want %v", keyIDs(keys), want)
		}

		// The store still checks the key itself, before any check.
		called := false
		bad := testKey("k5", "acme", KeyFull, 0)
		bad.Hash = []byte("short")
		err = st.PutKeyIf(ctx, bad, func([]Key) error { called = true; return nil })
		if sandbox.KindOf(err) != sandbox.KindInvalid || called {
			t.Fatalf("invalid key: got %v (check called %v), want invalid_request", err, called)
		}
		dup := testKey("k6", "acme", KeyFull, 0)
		dup.Hash = hashOf("secret-k1")
		if err := st.PutKeyIf(ctx, dup, func([]Key) error { return nil }); sandbox.KindOf(err) != sandbox.KindConflict {
			t.Fatalf("key with another key's secret: got %v, want conflict", err)
		}
	})
}

// TestPutKeyIfRace: a rule on how many keys an account holds holds when
// many keys are made at once.
func TestPutKeyIfRace(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		const tries, most = 8, 3
		atMost := func(keys []Key) error {
			if len(keys) >= most {
				return errRefused
			}
			return nil
		}
		errs := make([]error, tries)
		var wg sync.WaitGroup
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = st.PutKeyIf(context.Background(), testKey(fmt.Sprintf("k%d", i), "acme", KeyFull, 0), atMost)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil && err != errRefused {
				t.Errorf("PutKeyIf: got %v, want nil or the check's error", err)
			}
		}
		keys, err := st.ListKeys(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != most {
			t.Fatalf("keys: got %d, want %d", len(keys), most)
		}
	})
}

// lastAdmin refuses to remove id when it is the only admin key of keys.
func lastAdmin(id string) func(keys []Key) error {
	return func(keys []Key) error {
		admins, target := 0, false
		for _, k := range keys {
			if k.Kind == KeyAdmin {
				admins++
				target = target || k.ID == id
			}
		}
		if target && admins == 1 {
			return errRefused
		}
		return nil
	}
}

func TestDeleteKeyIf(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		for _, k := range []Key{
			testKey("admin1", "admin", KeyAdmin, 0),
			testKey("admin2", "admin", KeyAdmin, time.Second),
			testKey("f1", "acme", KeyFull, 2*time.Second),
			testKey("f2", "acme", KeyFull, 3*time.Second),
		} {
			if err := st.PutKey(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		var seen []string
		err := st.DeleteKeyIf(ctx, "f1", "acme", func(keys []Key) error {
			seen = keyIDs(keys)
			return nil
		})
		if err != nil {
			t.Fatalf("DeleteKeyIf: %v", err)
		}
		if want := []string{"f1", "f2"}; !reflect.DeepEqual(seen, want) {
			t.Fatalf("check of account acme saw %v, want %v", seen, want)
		}
		if _, err := st.KeyByHash(ctx, hashOf("secret-f1")); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("removed key by hash: got %v, want not_found", err)
		}

		if err := st.DeleteKeyIf(ctx, "admin1", "", func(keys []Key) error {
			seen = keyIDs(keys)
			return lastAdmin("admin1")(keys)
		}); err != nil {
			t.Fatalf("removing one of two admin keys: %v", err)
		}
		if want := []string{"admin1", "admin2", "f2"}; !reflect.DeepEqual(seen, want) {
			t.Fatalf("check of every account saw %v, want %v", seen, want)
		}
		if err := st.DeleteKeyIf(ctx, "admin2", "", lastAdmin("admin2")); err != errRefused {
			t.Fatalf("removing the last admin key: got %v, want the check's error", err)
		}
		if k, err := st.KeyByHash(ctx, hashOf("secret-admin2")); err != nil || k.ID != "admin2" {
			t.Fatalf("refused removal: key admin2 got %v, %v; want it kept", k, err)
		}
		if err := st.DeleteKeyIf(ctx, "nope", "", func([]Key) error { return nil }); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("absent key: got %v, want not_found", err)
		}
	})
}

// TestDeleteKeyIfRace: two admin keys removed at once, each under the
// last-admin rule: one stays.
func TestDeleteKeyIfRace(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		ids := []string{"admin1", "admin2", "admin3"}
		for i, id := range ids {
			if err := st.PutKey(ctx, testKey(id, "admin", KeyAdmin, time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := st.DeleteKeyIf(ctx, id, "", lastAdmin(id)); err != nil && err != errRefused {
					t.Errorf("DeleteKeyIf(%s): %v", id, err)
				}
			}()
		}
		wg.Wait()
		keys, err := st.ListKeys(ctx, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 {
			t.Fatalf("admin keys left: got %v, want exactly one", keyIDs(keys))
		}
	})
}

func TestNodeRegistry(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		n := &Node{ID: "node1", Addr: "198.18.0.1:7443", CPUs: 8, MemoryMiB: 16384, DiskMiB: 100000, Overcommit: 2, Compat: "runsc-x/avx2", SharedCheckpoints: true,
			Isolations: []string{"microvm", "gvisor"}}
		if err := st.RegisterNode(ctx, n, time.Hour); err != nil {
			t.Fatalf("RegisterNode: %v", err)
		}
		if n.Epoch != 1 || n.Lost || n.RegisteredAt.IsZero() {
			t.Fatalf("registered: epoch %d lost %v at %v, want epoch 1, not lost, a time", n.Epoch, n.Lost, n.RegisteredAt)
		}
		if d := n.LeaseEndsAt.Sub(n.RenewedAt); d < time.Hour-time.Second || d > time.Hour+time.Second {
			t.Errorf("lease: ends %v after the renewal, want 1h", d)
		}
		got, err := st.GetNode(ctx, "node1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Addr != n.Addr || got.CPUs != 8 || got.MemoryMiB != 16384 || got.DiskMiB != 100000 || got.Overcommit != 2 ||
			got.Compat != n.Compat || !got.SharedCheckpoints || got.Epoch != 1 || got.Expired || got.Lost {
			t.Fatalf("GetNode: got %+v, want %+v", got, n)
		}
		if !slices.Equal(got.Isolations, n.Isolations) {
			t.Fatalf("GetNode isolations: got %v, want %v", got.Isolations, n.Isolations)
		}

		// Registering again is a new epoch: the old one cannot renew.
		again := &Node{ID: "node1", Addr: "198.18.0.9:7443", CPUs: 4, Isolations: []string{"gvisor"}}
		if err := st.RegisterNode(ctx, again, time.Hour); err != nil {
			t.Fatal(err)
		}
		if again.Epoch != 2 {
			t.Fatalf("second registration: epoch %d, want 2", again.Epoch)
		}
		_, err = st.RenewNode(ctx, "node1", 1, NodeLoad{}, time.Hour)
		wantStale(t, "renewal of an old epoch", err)
		load := NodeLoad{Sandboxes: 3, VCPUs: 6, MemoryMiB: 12288, DiskMiB: 30000}
		renewed, err := st.RenewNode(ctx, "node1", 2, load, time.Hour)
		if err != nil {
			t.Fatalf("RenewNode: %v", err)
		}
		if renewed.Load != load || renewed.Epoch != 2 || renewed.Addr != again.Addr || renewed.RenewedAt.Before(again.RenewedAt) {
			t.Fatalf("renewed: got %+v", renewed)
		}
		if got, _ := st.GetNode(ctx, "node1"); got.Load != load {
			t.Fatalf("stored load: got %+v, want %+v", got.Load, load)
		}
		// A registration replaces the isolations; a renewal keeps them.
		if !slices.Equal(renewed.Isolations, again.Isolations) {
			t.Fatalf("renewed isolations: got %v, want %v", renewed.Isolations, again.Isolations)
		}
		if all, err := st.ListNodes(ctx); err != nil || len(all) != 1 || !slices.Equal(all[0].Isolations, again.Isolations) {
			t.Fatalf("ListNodes: got %+v, %v; want node1 with isolations %v", all, err, again.Isolations)
		}
		_, err = st.RenewNode(ctx, "node9", 1, load, time.Hour)
		wantStale(t, "renewal of an unknown node", err)

		// A live lease is never declared lost.
		if lost, err := st.MarkNodeLost(ctx, "node1", 2); err != nil || lost {
			t.Fatalf("MarkNodeLost of a live lease: got %v, %v; want false", lost, err)
		}

		short := &Node{ID: "node0", Addr: "198.18.0.2:7443"}
		if err := st.RegisterNode(ctx, short, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		waitExpired(t, st, "node0")
		if lost, err := st.MarkNodeLost(ctx, "node0", 7); err != nil || lost {
			t.Fatalf("MarkNodeLost of another epoch: got %v, %v; want false", lost, err)
		}
		if lost, err := st.MarkNodeLost(ctx, "node0", 1); err != nil || !lost {
			t.Fatalf("MarkNodeLost of an ended lease: got %v, %v; want true", lost, err)
		}
		if lost, err := st.MarkNodeLost(ctx, "node0", 1); err != nil || lost {
			t.Fatalf("second MarkNodeLost: got %v, %v; want false", lost, err)
		}
		_, err = st.RenewNode(ctx, "node0", 1, load, time.Hour)
		wantStale(t, "renewal of a lost node", err)

		nodes, err := st.ListNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, n := range nodes {
			ids = append(ids, fmt.Sprintf("%s/%d expired=%v lost=%v", n.ID, n.Epoch, n.Expired, n.Lost))
		}
		if want := []string{"node0/1 expired=true lost=true", "node1/2 expired=false lost=false"}; !reflect.DeepEqual(ids, want) {
			t.Fatalf("ListNodes: got %v, want %v", ids, want)
		}

		// A lost node comes back as a new epoch.
		back := &Node{ID: "node0", Addr: "198.18.0.2:7443"}
		if err := st.RegisterNode(ctx, back, time.Hour); err != nil {
			t.Fatal(err)
		}
		if back.Epoch != 2 || back.Lost {
			t.Fatalf("re-registered lost node: epoch %d lost %v, want 2 and false", back.Epoch, back.Lost)
		}
		if got, _ := st.GetNode(ctx, "node0"); got.Lost || got.Expired || got.Epoch != 2 {
			t.Fatalf("re-registered lost node: got %+v", got)
		}
		if _, err := st.GetNode(ctx, "node9"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("unknown node: got %v, want not_found", err)
		}
	})
}

// TestSetNodeCert: a certificate lands only on the entry's epoch and CSR
// it was issued for, survives renewals, and a registration (a new CSR)
// clears it.
func TestSetNodeCert(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		n := &Node{ID: "node1", Addr: "198.18.0.1:7443", CSR: "csr-a"}
		if err := st.RegisterNode(ctx, n, time.Hour); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name  string
			id    string
			epoch int64
			csr   string
		}{
			{"another epoch", "node1", 2, "csr-a"},
			{"another CSR", "node1", 1, "csr-b"},
			{"no CSR", "node1", 1, ""},
			{"an unknown node", "node9", 1, "csr-a"},
		} {
			wantStale(t, tc.name, st.SetNodeCert(ctx, tc.id, tc.epoch, tc.csr, "cert-x"))
		}
		if got, _ := st.GetNode(ctx, "node1"); got.Cert != "" || got.CSR != "csr-a" {
			t.Fatalf("after refused writes: got csr %q cert %q, want csr-a and no cert", got.CSR, got.Cert)
		}
		if err := st.SetNodeCert(ctx, "node1", 1, "csr-a", "cert-a"); err != nil {
			t.Fatalf("SetNodeCert: %v", err)
		}
		renewed, err := st.RenewNode(ctx, "node1", 1, NodeLoad{Sandboxes: 1}, time.Hour)
		if err != nil || renewed.Cert != "cert-a" {
			t.Fatalf("renewal: got %+v, %v; want cert-a kept", renewed, err)
		}
		if all, err := st.ListNodes(ctx); err != nil || len(all) != 1 || all[0].Cert != "cert-a" {
			t.Fatalf("ListNodes: got %+v, %v; want cert-a", all, err)
		}
		again := &Node{ID: "node1", Addr: "198.18.0.1:7443", CSR: "csr-b"}
		if err := st.RegisterNode(ctx, again, time.Hour); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.GetNode(ctx, "node1"); got.Cert != "" || got.CSR != "csr-b" {
			t.Fatalf("after a registration: got csr %q cert %q, want csr-b and no cert", got.CSR, got.Cert)
		}
		wantStale(t, "the old epoch's CSR", st.SetNodeCert(ctx, "node1", 1, "csr-a", "cert-a"))

		short := &Node{ID: "node0", Addr: "198.18.0.2:7443", CSR: "csr-0"}
		if err := st.RegisterNode(ctx, short, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		waitExpired(t, st, "node0")
		if lost, err := st.MarkNodeLost(ctx, "node0", 1); err != nil || !lost {
			t.Fatalf("MarkNodeLost: got %v, %v", lost, err)
		}
		wantStale(t, "a lost node", st.SetNodeCert(ctx, "node0", 1, "csr-0", "cert-0"))
	})
}

// waitExpired polls until node id's lease has ended by the store's clock.
func waitExpired(t *testing.T, st Store, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := st.GetNode(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if n.Expired {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: lease ending %v never ended", id, n.LeaseEndsAt)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInitValue(t *testing.T) {
	eachStoreReopened(t, func(t *testing.T, st Store, reopen func() Store) {
		ctx := context.Background()
		got, err := st.InitValue(ctx, "cluster-ca", []byte("first"))
		if err != nil || string(got) != "first" {
			t.Fatalf("first InitValue: got %q, %v; want first", got, err)
		}
		got[0] = 'X' // the caller's copy
		got, err = st.InitValue(ctx, "cluster-ca", []byte("second"))
		if err != nil || string(got) != "first" {
			t.Fatalf("second InitValue: got %q, %v; want first", got, err)
		}
		if got, _ := st.InitValue(ctx, "vault-key", []byte("other")); string(got) != "other" {
			t.Fatalf("another name: got %q, want other", got)
		}
		st = reopen()
		if got, err := st.InitValue(ctx, "cluster-ca", []byte("third")); err != nil || !bytes.Equal(got, []byte("first")) {
			t.Fatalf("InitValue after reopening: got %q, %v; want first", got, err)
		}
	})
}

func TestInitValueRace(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		const tries = 8
		got := make([]string, tries)
		var wg sync.WaitGroup
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := st.InitValue(context.Background(), "cluster-ca", []byte(fmt.Sprintf("v%d", i)))
				if err != nil {
					t.Errorf("InitValue: %v", err)
				}
				got[i] = string(v)
			}()
		}
		wg.Wait()
		for _, v := range got {
			if v != got[0] {
				t.Fatalf("values returned: %v, want one value for all", got)
			}
		}
	})
}

func TestTryLock(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		unlock, ok, err := st.TryLock(ctx, "node-detector")
		if err != nil || !ok {
			t.Fatalf("first TryLock: got %v, %v; want the lock", ok, err)
		}
		if u2, ok, err := st.TryLock(ctx, "node-detector"); err != nil || ok {
			if ok {
				u2()
			}
			t.Fatalf("second TryLock while held: got %v, %v; want refused", ok, err)
		}
		other, ok, err := st.TryLock(ctx, "other")
		if err != nil || !ok {
			t.Fatalf("TryLock of another name: got %v, %v; want the lock", ok, err)
		}
		other()
		unlock()
		again, ok, err := st.TryLock(ctx, "node-detector")
		if err != nil || !ok {
			t.Fatalf("TryLock after unlock: got %v, %v; want the lock", ok, err)
		}
		again()
	})
}
