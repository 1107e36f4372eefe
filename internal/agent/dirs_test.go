package agent

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
)

func TestListLimit(t *testing.T) {
	a := newTestAgent(t)
	for i := range 2500 { // more than one batch of reads
		a.write(fmt.Sprintf("big/f%04d", i), "")
	}
	for _, tc := range []struct {
		query     string
		n         int
		truncated bool
	}{
		{"", 2500, false},
		{"&limit=3", 3, true},
		{"&limit=1030", 1030, true},
		{"&limit=2500", 2500, false},
		{"&limit=100000", 2500, false},
	} {
		var list api.FileList
		a.doJSON("GET", "/files/list"+q("big")+tc.query, nil, http.StatusOK, &list)
		if len(list.Entries) != tc.n || list.Truncated != tc.truncated {
			t.Errorf("%q: got %d entries, truncated %v, want %d, %v", tc.query, len(list.Entries), list.Truncated, tc.n, tc.truncated)
		}
		if !slices.IsSortedFunc(list.Entries, func(x, y api.FileInfo) int { return strings.Compare(x.Name, y.Name) }) {
			t.Errorf("%q: entries not sorted by name", tc.query)
		}
	}
	for _, bad := range []string{"0", "-1", "100001", "x"} {
		a.wantError("GET", "/files/list"+q("big")+"&limit="+bad, nil, http.StatusBadRequest, "invalid_request")
	}
}
