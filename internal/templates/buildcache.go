package templates

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/withruntime/withruntime/internal/store"
	"github.com/withruntime/withruntime/internal/template"
)

// Bounds of the build cache: per account, the entries used last are kept,
// at most MaxCacheEntries of them holding at most the account's template
// quota in bytes (Config.Quota.MaxBytes; the layers of the entries' own
// steps), none unused for longer than MaxCacheAge. A layer only the cache names is freed by the next Collect
// after its entry goes.
const (
	MaxCacheEntries = 256
	MaxCacheAge     = 14 * 24 * time.Hour
)

// storeSandboxesAll selects every sandbox record.
var storeSandboxesAll = store.SandboxFilter{}

// cacheEntry is a step's result: the root after it (the base's layers,
// then one layer for each step up to it that changed files).
type cacheEntry struct {
	Base      string   `json:"base"`
	Layers    []string `json:"layers"`
	SizeBytes int64    `json:"size_bytes"`
	// LayerBytes is what the step's own layer holds: the entries' sum is
	// bounded per account by its template quota's bytes.
	LayerBytes int64     `json:"layer_bytes"`
	Used       time.Time `json:"used"`
	// Defaults are an image's, in the entry of a build's base image
	// (imageKey): its layers then stand for the image.
	Defaults *template.Defaults `json:"defaults,omitempty"`
}

// buildCache is the step cache of a server: account -> key -> entry,
// kept in one JSON file under Config.BuildDir, written whole and renamed
// into place (a crash leaves the old index or the new one).
type buildCache struct {
	mu      sync.Mutex
	file    string
	entries map[string]map[string]*cacheEntry
}

func (l *Library) cacheOf() *buildCache {
	l.buildsInit()
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if l.cache == nil {
		c := &buildCache{entries: map[string]map[string]*cacheEntry{}}
		if l.cfg.BuildDir != "" {
			c.file = filepath.Join(l.cfg.BuildDir, "cache.json")
			if data, err := os.ReadFile(c.file); err == nil {
				if err := json.Unmarshal(data, &c.entries); err != nil || c.entries == nil {
					l.log.Warn("the build cache's index is unreadable; starting with an empty cache", "file", c.file, "err", err)
					c.entries = map[string]map[string]*cacheEntry{}
				}
			}
		}
		l.cache = c
	}
	return l.cache
}

// cacheTake returns account's entry of key, and makes its layers build
// id's active ones, under l.mu so that Collect never frees them between.
func (l *Library) cacheTake(account, key, id string) (cacheEntry, bool) {
	c := l.cacheOf()
	l.mu.Lock()
	defer l.mu.Unlock()
	c.mu.Lock()
	e := c.entries[account][key]
	if e == nil || !l.layersThere(e.Layers) {
		c.mu.Unlock()
		return cacheEntry{}, false
	}
	e.Used = l.cfg.Now()
	out := *e
	out.Layers = slices.Clone(e.Layers)
	c.mu.Unlock()
	l.setActive(id, out.Layers)
	return out, true
}

// layersThere reports whether every layer is stored (a cache entry whose
// layer went missing, a disk restored from an old copy, is not used).
func (l *Library) layersThere(layers []string) bool {
	type direr interface{ Dir(string) (string, error) }
	store := l.cfg.Layers
	if c, ok := store.(*checkedLayers); ok {
		store = c.Layers
	}
	d, ok := store.(direr)
	if !ok {
		return true
	}
	for _, dg := range layers {
		if _, err := d.Dir(dg); err != nil {
			return false
		}
	}
	return true
}

// cachePut records account's entry of key and writes the index.
func (l *Library) cachePut(account, key string, e cacheEntry) {
	c := l.cacheOf()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[account] == nil {
		c.entries[account] = map[string]*cacheEntry{}
	}
	e.Used = l.cfg.Now()
	e.Layers = slices.Clone(e.Layers)
	c.entries[account][key] = &e
	c.prune(l.cfg.Now(), l.cfg.Quota.MaxBytes)
	if err := c.save(); err != nil {
		l.log.Warn("writing the build cache's index", "file", c.file, "err", err)
	}
}

// prune drops the entries past the bounds: age, then count and the
// bytes of the layers the entries made (maxBytes, 0 for no bound), the
// least recently used first. The caller holds c.mu.
func (c *buildCache) prune(now time.Time, maxBytes int64) {
	for account, m := range c.entries {
		type kv struct {
			k    string
			used time.Time
			size int64
		}
		var all []kv
		for k, e := range m {
			if now.Sub(e.Used) > MaxCacheAge {
				delete(m, k)
				continue
			}
			all = append(all, kv{k, e.Used, e.LayerBytes})
		}
		slices.SortFunc(all, func(a, b kv) int { return b.used.Compare(a.used) })
		var total int64
		for i, x := range all {
			total += x.size
			if i >= MaxCacheEntries || (maxBytes > 0 && total > maxBytes && i > 0) {
				delete(m, x.k)
			}
		}
		if len(m) == 0 {
			delete(c.entries, account)
		}
	}
}

// save writes the index whole, then renames it into place. The caller
// holds c.mu.
func (c *buildCache) save() error {
	if c.file == "" {
		return nil
	}
	data, err := json.Marshal(c.entries)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.file), 0o700); err != nil {
		return err
	}
	tmp := c.file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, c.file)
}

// buildKeep adds to keep the layers the cache names (after dropping the
// entries past its bounds) and those running builds use. Collect calls it
// holding l.mu.
func (l *Library) buildKeep(keep map[string]bool) {
	c := l.cacheOf()
	c.mu.Lock()
	c.prune(l.cfg.Now(), l.cfg.Quota.MaxBytes)
	for _, m := range c.entries {
		for _, e := range m {
			for _, d := range e.Layers {
				keep[d] = true
			}
		}
	}
	c.mu.Unlock()
	l.activeLayers(keep)
}

// removeAll removes a build's context directory.
func removeAll(dir string) error { return os.RemoveAll(dir) }

// StartBuilds readies the builds of a server that starts: what a previous
// process left (contexts of builds in flight, their sandboxes) goes. Call
// it once the sandboxes (SetSandboxes) are there, before the API serves.
func (l *Library) StartBuilds() {
	if l.cfg.BuildDir != "" {
		os.RemoveAll(filepath.Join(l.cfg.BuildDir, "contexts"))
	}
	if l.sandboxes() != nil {
		l.stopOrphans(context.Background())
	}
}
