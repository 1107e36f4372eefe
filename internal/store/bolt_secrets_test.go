package store

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/withruntime/withruntime/internal/sandbox"
)

func secret(account, name, host string) Secret {
	return Secret{
		Account: account, Name: name, Host: host,
		Nonce: []byte("nonce-" + name), Ciphertext: []byte("sealed-" + name),
		UpdatedAt: t0,
	}
}

func TestSecretsRoundTrip(t *testing.T) {
	eachStoreReopened(t, func(t *testing.T, b Store, reopen func() Store) {
		ctx := t.Context()
		// "a" is a prefix of "ab": one account's secrets must not show in the
		// other's list.
		for _, s := range []Secret{
			secret("a", "ZED", "z.example.org"),
			secret("a", "OPENAI_API_KEY", "api.openai.com"),
			secret("ab", "OTHER", "*.example.org"),
		} {
			if err := b.PutSecret(ctx, s); err != nil {
				t.Fatalf("PutSecret %s: %v", s.Name, err)
			}
		}
		replaced := secret("a", "ZED", "zz.example.org")
		replaced.UpdatedAt = t0.Add(time.Hour)
		if err := b.PutSecret(ctx, replaced); err != nil {
			t.Fatal(err)
		}
		b = reopen()

		got, err := b.ListSecrets(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		want := []Secret{secret("a", "OPENAI_API_KEY", "api.openai.com"), replaced}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ListSecrets(a): got %+v, want %+v", got, want)
		}
		if got, _ := b.ListSecrets(ctx, "ab"); len(got) != 1 || got[0].Name != "OTHER" {
			t.Errorf("ListSecrets(ab): got %+v, want OTHER only", got)
		}
		if got, err := b.ListSecrets(ctx, "nobody"); err != nil || len(got) != 0 {
			t.Errorf("ListSecrets(nobody): got %+v, %v; want none", got, err)
		}

		if err := b.DeleteSecret(ctx, "a", "ZED"); err != nil {
			t.Fatalf("DeleteSecret: %v", err)
		}
		if err := b.DeleteSecret(ctx, "a", "ZED"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("DeleteSecret again: got %v, want not_found", err)
		}
		if err := b.DeleteSecret(ctx, "ab", "OPENAI_API_KEY"); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("DeleteSecret of another account's name: got %v, want not_found", err)
		}
		if got, _ := b.ListSecrets(ctx, "a"); len(got) != 1 || got[0].Name != "OPENAI_API_KEY" {
			t.Errorf("after delete: got %+v, want OPENAI_API_KEY only", got)
		}
	})
}

func TestSecretsRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, b Store) {
		ctx := t.Context()
		noNonce := secret("a", "N", "h.example")
		noNonce.Nonce = nil
		tests := []struct {
			name string
			s    Secret
		}{
			{"no account", secret("", "N", "h.example")},
			{"no name", secret("a", "", "h.example")},
			{"NUL in account", secret("a\x00b", "N", "h.example")},
			{"NUL in name", secret("a", "N\x00", "h.example")},
			{"no nonce", noNonce},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := b.PutSecret(ctx, tt.s); !errors.Is(err, sandbox.ErrInvalid) {
					t.Errorf("got %v, want invalid_request", err)
				}
			})
		}
		if _, err := b.ListSecrets(ctx, ""); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("ListSecrets without an account: got %v, want invalid_request", err)
		}
		if err := b.DeleteSecret(ctx, "", "N"); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("DeleteSecret without an account: got %v, want invalid_request", err)
		}
	})
}
