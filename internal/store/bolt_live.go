package store

import (
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// bucketLive indexes the sandboxes that have not ended (id -> nothing), so
// that listing live and paused sandboxes (the reaper and the meter, every
// second) reads those records only, never every record ever made.
var bucketLive = []byte("live_sandboxes")

// putSandboxTx writes r and keeps the live index in step, in tx.
func putSandboxTx(tx *bolt.Tx, r *sandbox.Record, data []byte) error {
	if err := tx.Bucket(bucketSandboxes).Put([]byte(r.ID), data); err != nil {
		return err
	}
	if r.State == sandbox.StateEnded {
		return tx.Bucket(bucketLive).Delete([]byte(r.ID))
	}
	return tx.Bucket(bucketLive).Put([]byte(r.ID), nil)
}

// indexLive builds the live index of a database made before it existed.
func indexLive(tx *bolt.Tx) error {
	if tx.Bucket(bucketLive) != nil {
		return nil
	}
	live, err := tx.CreateBucket(bucketLive)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketSandboxes).ForEach(func(k, v []byte) error {
		var r sandbox.Record
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decoding sandbox %s: %w", k, err)
		}
		if r.State == sandbox.StateEnded {
			return nil
		}
		return live.Put(k, nil)
	})
}

// onlyLive reports whether every record f can match has not ended.
func onlyLive(f SandboxFilter) bool {
	return len(f.States) > 0 && !slices.Contains(f.States, sandbox.StateEnded)
}

// forEachSandbox calls fn with each record f can match: through the live
// index when f wants no ended sandbox.
func forEachSandbox(tx *bolt.Tx, f SandboxFilter, fn func(k, v []byte) error) error {
	all := tx.Bucket(bucketSandboxes)
	if !onlyLive(f) {
		return all.ForEach(fn)
	}
	return tx.Bucket(bucketLive).ForEach(func(k, _ []byte) error {
		if v := all.Get(k); v != nil {
			return fn(k, v)
		}
		return nil
	})
}
