package e2bcompat

import (
	"fmt"
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
	// maxMetadataKey is the kernel's 255 bytes of an attribute name less
	// "user.e2b.".
	maxMetadataKey = 255 - len("user."+metadataAttrPrefix)
)

// uploadMetadata is the attributes an upload's X-Metadata-* headers ask
// for: keys lowercased, the first value of a repeated header, printable
// ASCII only, at most api.MaxFileAttrBytes in all with "user.e2b."
// counted per key. No header: none, which clears what the file had.
func uploadMetadata(h http.Header) (map[string]string, error) {
	var attrs map[string]string
	total := 0
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys) // one answer whichever the map's order
	for _, k := range keys {
		if len(k) <= len(metadataHeaderPrefix) || !strings.EqualFold(k[:len(metadataHeaderPrefix)], metadataHeaderPrefix) {
			continue
		}
		key := strings.ToLower(k[len(metadataHeaderPrefix):])
		value := h[k][0]
		if !printableASCII(key) || strings.ContainsAny(key, " =") || !printableASCII(value) {
			return nil, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("metadata key %q or its value is not printable US-ASCII", key)}
		}
		if len(key) > maxMetadataKey {
			return nil, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("metadata key %q is over %d bytes", key, maxMetadataKey)}
		}
		if _, dup := attrs[metadataAttrPrefix+key]; dup {
			continue
		}
		if total += len("user."+metadataAttrPrefix) + len(key) + len(value); total > api.MaxFileAttrBytes {
			return nil, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("metadata is over %d bytes (keys with their user.e2b. prefix, plus values)", api.MaxFileAttrBytes)}
		}
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[metadataAttrPrefix+key] = value
	}
	return attrs, nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
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
