package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"
	"testing"
)

func TestClassifyFileSystemErrors(t *testing.T) {
	tests := []struct {
		err        error
		wantStatus int
		wantCode   string
	}{
		{&fs.PathError{Op: "open", Path: "/proc/x", Err: syscall.EPERM}, http.StatusForbidden, "forbidden"},
		{&fs.PathError{Op: "open", Path: "/ro/x", Err: syscall.EROFS}, http.StatusForbidden, "forbidden"},
		{fmt.Errorf("writing: %w", syscall.ENOSPC), http.StatusRequestEntityTooLarge, "payload_too_large"},
		{&fs.PathError{Op: "stat", Path: "/nope", Err: syscall.ENOENT}, http.StatusNotFound, "not_found"},
		{errors.New("something else"), http.StatusInternalServerError, "internal"},
	}
	for _, tt := range tests {
		status, detail := classify(tt.err)
		if status != tt.wantStatus || detail.Code != tt.wantCode {
			t.Errorf("%v: got %d %s, want %d %s", tt.err, status, detail.Code, tt.wantStatus, tt.wantCode)
		}
	}
}
