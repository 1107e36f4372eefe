package store

import (
	"errors"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

// TestVolumes: one name per account (another account may take it), get,
// list by name, delete; absent ones are not_found, in both stores.
func TestVolumes(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := t.Context()
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		put := func(id, account, name string) error {
			return st.PutVolume(ctx, Volume{ID: id, Account: account, Name: name, SizeGiB: 2, CreatedAt: at})
		}
		for _, v := range [][3]string{{"vol_1", "acc_a", "data"}, {"vol_2", "acc_a", "cache"}, {"vol_3", "acc_b", "data"}} {
			if err := put(v[0], v[1], v[2]); err != nil {
				t.Fatalf("put %v: %v", v, err)
			}
		}
		if err := put("vol_4", "acc_a", "data"); !errors.Is(err, sandbox.ErrConflict) {
			t.Fatalf("second data in acc_a: %v, want conflict", err)
		}
		if err := put("vol_1", "acc_c", "other"); !errors.Is(err, sandbox.ErrConflict) {
			t.Fatalf("same id: %v, want conflict", err)
		}
		v, err := st.GetVolume(ctx, "acc_b", "data")
		if err != nil || v.ID != "vol_3" || v.SizeGiB != 2 || !v.CreatedAt.Equal(at) {
			t.Fatalf("get: %+v %v", v, err)
		}
		if _, err := st.GetVolume(ctx, "acc_b", "cache"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("other account's: %v, want not_found", err)
		}
		list, err := st.ListVolumes(ctx, "acc_a")
		if err != nil || len(list) != 2 || list[0].Name != "cache" || list[1].Name != "data" {
			t.Fatalf("list: %+v %v", list, err)
		}
		all, err := st.ListVolumes(ctx, "")
		if err != nil || len(all) != 3 {
			t.Fatalf("list all: %+v %v", all, err)
		}
		if err := st.DeleteVolume(ctx, "acc_b", "cache"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("delete other's: %v", err)
		}
		if err := st.DeleteVolume(ctx, "acc_a", "data"); err != nil {
			t.Fatal(err)
		}
		if err := put("vol_5", "acc_a", "data"); err != nil {
			t.Fatalf("name free after delete: %v", err)
		}
		if err := st.DeleteVolume(ctx, "acc_a", "nope\x00"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("NUL name: %v", err)
		}
	})
}
