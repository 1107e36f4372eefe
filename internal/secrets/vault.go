package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/egress"
	"github.com/withruntime/withruntime/internal/store"
)

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = "wrsec_"

// sealInfo names the derived sealing key; the key file's own bytes key the
// placeholders' HMAC, so the two uses never share a key.
const sealInfo = "withruntime secrets: AES-256-GCM sealing key v1"

// Vault keeps the secrets of every account, sealed, in a store.
type Vault struct {
	store  store.Secrets
	aead   cipher.AEAD
	macKey []byte

	// mu makes counting an account's secrets and adding one a single step.
	mu sync.Mutex
}

var _ egress.Secrets = (*Vault)(nil)

// Open reads the key file at keyPath (making it, mode 0600, when there is
// none) and returns the vault over st. The key file must stay outside the
// database: whoever holds both can read every secret; whoever loses it
// loses them all.
func Open(keyPath string, st store.Secrets) (*Vault, error) {
	if st == nil {
		return nil, fmt.Errorf("secrets: no store")
	}
	key, err := loadKey(keyPath)
	if err != nil {
		return nil, err
	}
	return OpenKey(key, st)
}

// OpenKey returns the vault over st with key, KeySize bytes. A node of a
// many-host installation keeps its key in the store (every node must open
// what any API server sealed), so whoever reads that store reads every
// secret: its credentials are the installation's root of trust.
func OpenKey(key []byte, st store.Secrets) (*Vault, error) {
	if st == nil {
		return nil, fmt.Errorf("secrets: no store")
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets: a key is %d bytes, not %d", KeySize, len(key))
	}
	sealKey, err := hkdf.Key(sha256.New, key, nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("deriving the sealing key: %w", err)
	}
	block, err := aes.NewCipher(sealKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Vault{store: st, aead: aead, macKey: slices.Clone(key)}, nil
}

// Placeholder is what the sandboxes of account see in variable name: it
// identifies the secret and nothing more, and stays the same when the
// value changes.
func (v *Vault) Placeholder(account, name string) string {
	m := hmac.New(sha256.New, v.macKey)
	m.Write([]byte(account + "\x00" + name))
	return PlaceholderPrefix + hex.EncodeToString(m.Sum(nil))[:32]
}

// additionalData binds a sealed value to its account, name and host: a
// value copied to another secret, or a host changed in the database, no
// longer opens.
func additionalData(account, name, host string) []byte {
	return []byte("withruntime-secret-v1\x00" + account + "\x00" + name + "\x00" + host)
}

// Set stores value as secret name of account, bound to host, replacing the
// secret of that name if there is one. Its errors never hold the value.
func (v *Vault) Set(ctx context.Context, account, name, host, value string) (api.SecretInfo, error) {
	if account == "" {
		return api.SecretInfo{}, invalid("no account")
	}
	if err := CheckName(name); err != nil {
		return api.SecretInfo{}, err
	}
	host, err := NormalizeHost(host)
	if err != nil {
		return api.SecretInfo{}, err
	}
	if err := CheckValue(value); err != nil {
		return api.SecretInfo{}, err
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	have, err := v.store.ListSecrets(ctx, account)
	if err != nil {
		return api.SecretInfo{}, fmt.Errorf("listing secrets: %w", err)
	}
	if len(have) >= MaxPerAccount && !hasName(have, name) {
		return api.SecretInfo{}, invalid("the account has %d secrets, the most it may have: remove one first", len(have))
	}
	nonce := make([]byte, v.aead.NonceSize())
	rand.Read(nonce) // never fails (crypto/rand)
	s := store.Secret{
		Account:    account,
		Name:       name,
		Host:       host,
		Nonce:      nonce,
		Ciphertext: v.aead.Seal(nil, nonce, []byte(value), additionalData(account, name, host)),
		UpdatedAt:  time.Now().UTC(),
	}
	if err := v.store.PutSecret(ctx, s); err != nil {
		return api.SecretInfo{}, fmt.Errorf("storing secret %s: %w", name, err)
	}
	return info(s), nil
}

func hasName(list []store.Secret, name string) bool {
	for _, s := range list {
		if s.Name == name {
			return true
		}
	}
	return false
}

func info(s store.Secret) api.SecretInfo {
	return api.SecretInfo{Name: s.Name, Host: s.Host, UpdatedAt: s.UpdatedAt}
}

// List returns the names and hosts of account's secrets, by name.
func (v *Vault) List(ctx context.Context, account string) ([]api.SecretInfo, error) {
	list, err := v.list(ctx, account)
	if err != nil {
		return nil, err
	}
	out := make([]api.SecretInfo, 0, len(list))
	for _, s := range list {
		out = append(out, info(s))
	}
	return out, nil
}

func (v *Vault) list(ctx context.Context, account string) ([]store.Secret, error) {
	if account == "" {
		return nil, invalid("no account")
	}
	return v.store.ListSecrets(ctx, account)
}

// Delete removes secret name of account (not_found when there is none).
func (v *Vault) Delete(ctx context.Context, account, name string) error {
	if account == "" {
		return invalid("no account")
	}
	// Only the syntax: a name refused for new secrets may be an old one.
	if err := checkNameSyntax(name); err != nil {
		return err
	}
	return v.store.DeleteSecret(ctx, account, name)
}

// Placeholders returns the placeholder of each of account's secrets, by
// name: what every command of the account's sandboxes gets in its
// environment.
func (v *Vault) Placeholders(ctx context.Context, account string) (map[string]string, error) {
	list, err := v.list(ctx, account)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list))
	for _, s := range list {
		out[s.Name] = v.Placeholder(account, s.Name)
	}
	return out, nil
}

// ForAccount implements egress.Secrets: account's secrets as they are now,
// opened. Only the egress proxy calls it. A secret that does not open (the
// key file changed, the database was altered) fails the whole call: the
// proxy then swaps nothing rather than guess.
func (v *Vault) ForAccount(account string) ([]egress.Secret, error) {
	list, err := v.list(context.Background(), account)
	if err != nil {
		return nil, err
	}
	out := make([]egress.Secret, 0, len(list))
	for _, s := range list {
		if len(s.Nonce) != v.aead.NonceSize() {
			return nil, fmt.Errorf("opening secret %s of account %s: nonce is %d bytes, want %d", s.Name, account, len(s.Nonce), v.aead.NonceSize())
		}
		plain, err := v.aead.Open(nil, s.Nonce, s.Ciphertext, additionalData(account, s.Name, s.Host))
		if err != nil {
			// GCM says only that authentication failed: nothing of the value.
			return nil, fmt.Errorf("opening secret %s of account %s (was the secrets key replaced?): %w", s.Name, account, err)
		}
		out = append(out, egress.Secret{
			Name:        s.Name,
			Host:        s.Host,
			Placeholder: v.Placeholder(account, s.Name),
			Value:       string(plain),
		})
	}
	return out, nil
}
