package e2bcompat

import (
	"net/http"
	"sort"
	"strings"

	"github.com/withruntime/withruntime/api"
)

// File metadata (envd 0.6.2): an upload's X-Metadata-<key> headers become
// the file's user.e2b.<key> extended attributes, which EntryInfo reports
// back as its metadata, as E2B's daemon keeps them.

const (
	metadataHeaderPrefix = "X-Metadata-"
	// metadataAttrPrefix is what a key is stored under, without the
	// "user." every user-namespace attribute has.
	metadataAttrPrefix = "e2b."
)

// uploadMetadata is the attributes an upload's X-Metadata-* headers ask
// for: keys lowercased, the first value of a repeated header. The agent
// checks them as it checks every attribute (printable ASCII, at most
// api.MaxFileAttrBytes with "user.e2b." counted per key: E2B's bounds)
// before it writes anything. No header: none, which clears what the file
// had.
func uploadMetadata(h http.Header) map[string]string {
	var attrs map[string]string
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys) // one answer whichever the map's order
	for _, k := range keys {
		if len(k) <= len(metadataHeaderPrefix) || !strings.EqualFold(k[:len(metadataHeaderPrefix)], metadataHeaderPrefix) {
			continue
		}
		name := metadataAttrPrefix + strings.ToLower(k[len(metadataHeaderPrefix):])
		if _, dup := attrs[name]; dup {
			continue
		}
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[name] = h[k][0]
	}
	return attrs
}

// checkMetadataKept refuses a write whose file came back without the
// metadata asked for: a sandbox whose agent predates attributes ignores
// them.
func checkMetadataKept(asked map[string]string, fi *api.FileInfo) error {
	if len(asked) > 0 && len(fi.Attrs) == 0 {
		return &Error{Status: http.StatusBadRequest, Message: "this sandbox keeps no file metadata (its agent is older than it): " + fi.Path + " was written without it"}
	}
	return nil
}

// fileMetadata is the E2B metadata among a file's attributes: those named
// e2b.<key>, by key; nil when there is none.
func fileMetadata(attrs map[string]string) map[string]string {
	var md map[string]string
	for name, value := range attrs {
		key, ok := strings.CutPrefix(name, metadataAttrPrefix)
		if !ok || key == "" {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[key] = value
	}
	return md
}
