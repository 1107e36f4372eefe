package e2bcompat

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// The files E2B's template builder uploads before a build starts: one
// archive per copy step (a tar, gzipped by default, of the step's source
// named relative to the build's context), named by the hash the client
// computes of the step and its files. They wait on disk for the build
// that copies them, an account's apart from another's, bounded in sum per
// account, and are removed once a build has taken them or after
// uploadTTL.

const (
	// maxAccountUploads bounds what one account holds uploaded at once:
	// the API's bound on a build's context, which they become.
	maxAccountUploads = 2 << 30
	// uploadTTL is how long an upload no build has taken is kept.
	uploadTTL = time.Hour
)

// filesHash is the shape of E2B's files hash: sha256, in hex.
var filesHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// uploads is the server's store of uploaded build files.
type uploads struct {
	dir string

	mu sync.Mutex
	// held is what each account holds, by hash.
	held map[string]map[string]*upload
}

type upload struct {
	size int64
	at   time.Time
	// writing is set while an upload is being written: a second upload of
	// the same hash waits for nothing and is refused.
	writing bool
}

// newUploads keeps uploads under dir, emptied first: nothing a previous
// run left there is any build's.
func newUploads(dir string) (*uploads, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "withruntime-e2b-uploads-")
		if err != nil {
			return nil, err
		}
		dir = d
	} else {
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	return &uploads{dir: dir, held: map[string]map[string]*upload{}}, nil
}

// path is where account's upload of hash is kept. Both are checked by
// their callers (hash against filesHash; account is a digest or an id the
// store made), and the account's name is hashed so that no account name
// is ever a path.
func (u *uploads) path(account, hash string) string {
	return filepath.Join(u.dir, keyDigest(account), hash)
}

// present says whether account holds hash, whole.
func (u *uploads) present(account, hash string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.expireLocked(time.Now())
	up := u.held[account][hash]
	return up != nil && !up.writing
}

// put stores body as account's upload of hash, at most what the
// account's bound leaves; a failed or refused upload leaves nothing.
func (u *uploads) put(account, hash string, body io.Reader) error {
	u.mu.Lock()
	u.expireLocked(time.Now())
	m := u.held[account]
	if m == nil {
		m = map[string]*upload{}
		u.held[account] = m
	}
	if up := m[hash]; up != nil && up.writing {
		u.mu.Unlock()
		return &Error{Status: http.StatusConflict, Message: "these files are being uploaded already"}
	}
	var used int64
	for h, up := range m {
		if h != hash {
			used += up.size
		}
	}
	room := int64(maxAccountUploads) - used
	m[hash] = &upload{writing: true, at: time.Now()}
	u.mu.Unlock()

	n, err := u.write(account, hash, body, room)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil {
		delete(m, hash)
		os.Remove(u.path(account, hash))
		return err
	}
	m[hash] = &upload{size: n, at: time.Now()}
	return nil
}

func (u *uploads) write(account, hash string, body io.Reader, room int64) (int64, error) {
	if room <= 0 {
		return 0, &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("this account holds %d bytes of uploaded build files not yet built: start the builds that copy them, or wait an hour", int64(maxAccountUploads))}
	}
	p := u.path(account, hash)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(body, room+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, &Error{Status: http.StatusBadRequest, Message: "reading the upload: " + err.Error()}
	}
	if n > room {
		return 0, &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the uploaded build files of this account are over %d bytes", int64(maxAccountUploads))}
	}
	return n, nil
}

// open opens account's upload of hash.
func (u *uploads) open(account, hash string) (*os.File, error) {
	if !u.present(account, hash) {
		return nil, fs.ErrNotExist
	}
	return os.Open(u.path(account, hash))
}

// drop removes account's uploads of hashes: a build has taken them.
func (u *uploads) drop(account string, hashes []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, h := range hashes {
		if up := u.held[account][h]; up != nil && !up.writing {
			delete(u.held[account], h)
			os.Remove(u.path(account, h))
		}
	}
}

// expireLocked removes the uploads older than uploadTTL.
func (u *uploads) expireLocked(now time.Time) {
	for account, m := range u.held {
		for h, up := range m {
			if !up.writing && now.Sub(up.at) > uploadTTL {
				delete(m, h)
				os.Remove(u.path(account, h))
			}
		}
		if len(m) == 0 {
			delete(u.held, account)
		}
	}
}
