package store

import (
	"context"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// liveIDs lists the ids of running and paused sandboxes, as the reaper and
// the meter do.
func liveIDs(t *testing.T, b *Bolt) []string {
	t.Helper()
	recs, err := b.ListSandboxes(context.Background(), SandboxFilter{States: []sandbox.State{sandbox.StateRunning, sandbox.StatePaused}})
	if err != nil {
		t.Fatalf("listing live sandboxes: %v", err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return ids
}

// corrupt replaces a record's bytes with something no decoder accepts: a
// listing that reads it fails.
func corrupt(t *testing.T, b *Bolt, id string) {
	t.Helper()
	if err := b.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).Put([]byte(id), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
}

// TestLiveListingReadsOnlyLiveRecords: listing running and paused
// sandboxes follows every transition (usage samples included) and never
// reads an ended record, however many there are.
func TestLiveListingReadsOnlyLiveRecords(t *testing.T) {
	ctx := context.Background()
	b, _ := openTest(t)
	for i := range 50 {
		r := record(fmt.Sprintf("sbxended%02d", i), "a", sandbox.StateEnded, t0)
		if err := b.PutSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
		corrupt(t, b, r.ID) // never to be read again by a live listing
	}
	run := record("sbxrun", "a", sandbox.StateRunning, t0)
	pause := record("sbxpause", "a", sandbox.StateRunning, t0.Add(1))
	for _, r := range []*sandbox.Record{run, pause} {
		if err := b.PutSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	pause.State = sandbox.StatePaused
	if err := b.RecordUsage(ctx, pause, UsageDelta{}); err != nil {
		t.Fatal(err)
	}
	if got := liveIDs(t, b); fmt.Sprint(got) != "[sbxrun sbxpause]" {
		t.Fatalf("live: got %v, want [sbxrun sbxpause]", got)
	}
	// Listing everything does read the ended records (and here fails on
	// them): proof the live listing above did not.
	if _, err := b.ListSandboxes(ctx, SandboxFilter{}); err == nil {
		t.Fatal("listing every record: got no error, want the corrupt ended records decoded")
	}
	run.State = sandbox.StateEnded
	if err := b.PutSandbox(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteSandbox(ctx, pause.ID); err != nil {
		t.Fatal(err)
	}
	if got := liveIDs(t, b); len(got) != 0 {
		t.Fatalf("live after an end and a removal: got %v, want none", got)
	}
}

// TestLiveIndexBuiltForAnOldDatabase: a database from before the index
// gets it on open.
func TestLiveIndexBuiltForAnOldDatabase(t *testing.T) {
	ctx := context.Background()
	b, path := openTest(t)
	for _, r := range []*sandbox.Record{
		record("sbxold1", "a", sandbox.StateRunning, t0),
		record("sbxold2", "a", sandbox.StateEnded, t0.Add(1)),
		record("sbxold3", "a", sandbox.StatePaused, t0.Add(2)),
	} {
		if err := b.PutSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketLive) }); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b2, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if got := liveIDs(t, b2); fmt.Sprint(got) != "[sbxold1 sbxold3]" {
		t.Fatalf("live after reopening an old database: got %v, want [sbxold1 sbxold3]", got)
	}
}
