package sandbox

import (
	"slices"
	"strconv"
	"strings"
)

// CheckIsolation reports a create's isolation that the API does not know
// (invalid_request); "" is the default's and passes. A single server and
// the control plane of many answer with the same words.
func CheckIsolation(name string) error {
	if name == "" || slices.Contains(Isolations, name) {
		return nil
	}
	quoted := make([]string, len(Isolations))
	for i, n := range Isolations {
		quoted[i] = strconv.Quote(n)
	}
	return Errorf(KindInvalid, "isolation must be %s, got %q", strings.Join(quoted, " or "), name)
}
