package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/api"
	"github.com/withruntime/withruntime/internal/testenv"
)

// The default image builds software with no network: C with gcc and make,
// Go, a Node project's npm test, and sqlite3. The same sandbox has the root
// disk its create asked for.
func TestImageBuildsSoftware(t *testing.T) {
	s := testenv.StartServer(t)
	env := s.Env()
	status, body := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(`{"vcpus":2,"memory_mib":2048,"disk_gib":2,"timeout_seconds":900}`))
	var sb api.Sandbox
	if status != http.StatusCreated || json.Unmarshal(body, &sb) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	if sb.DiskGiB != 2 {
		t.Fatalf("create answered disk_gib %d, want 2", sb.DiskGiB)
	}
	sh := func(t *testing.T, script string) string {
		t.Helper()
		out, errs, code := cli(t, env, "sandbox", "exec", sb.ID, "--", "sh", "-c", script)
		if code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
		}
		return out
	}

	t.Run("versions", func(t *testing.T) {
		out := sh(t, "go version; node --version; npm --version; gcc --version | head -1; make --version | head -1; sqlite3 --version; python3 --version; python -c 'import sys; print(\"python is %d.%d\" % sys.version_info[:2])'; jq --version; unzip -v | head -1; less --version | head -1")
		t.Logf("tool versions:\n%s", out)
		for _, want := range []string{"go version go1.", "\nv", "gcc", "GNU Make", "Python 3.13", "python is 3.13", "jq-"} {
			if !strings.Contains(out, want) {
				t.Errorf("got %q, want it to contain %q", out, want)
			}
		}
	})

	t.Run("C with make", func(t *testing.T) {
		out := sh(t, `set -e; mkdir -p c && cd c
cat > hello.c <<'EOF'
#include <stdio.h>
int main(void) { printf("c says %d\n", 6 * 7); return 0; }
EOF
printf 'hello: hello.c\n\tcc -O2 -o hello hello.c\n' > Makefile
make -s && ./hello`)
		if !strings.HasSuffix(out, "c says 42\n") {
			t.Fatalf("got %q, want it to end with c says 42", out)
		}
	})

	t.Run("Go", func(t *testing.T) {
		out := sh(t, `set -e; mkdir -p gohello && cd gohello
go mod init example.test/hello >/dev/null 2>&1
cat > main.go <<'EOF'
package main

import "fmt"

func main() { fmt.Println("go says", 6*7) }
EOF
go build -o hello . && ./hello`)
		if out != "go says 42\n" {
			t.Fatalf("got %q, want go says 42", out)
		}
	})

	t.Run("npm test", func(t *testing.T) {
		out := sh(t, `set -e; mkdir -p nodeproj && cd nodeproj
cat > package.json <<'EOF'
{"name": "nodeproj", "version": "1.0.0", "private": true, "scripts": {"test": "node test.js"}}
EOF
cat > test.js <<'EOF'
const assert = require("assert");
assert.strictEqual(6 * 7, 42);
console.log("node says " + [1, 2, 3].map((x) => x * 2).join(","));
EOF
npm test 2>&1`)
		if !strings.Contains(out, "node says 2,4,6") {
			t.Fatalf("got %q, want node says 2,4,6", out)
		}
	})

	t.Run("sqlite3", func(t *testing.T) {
		out := sh(t, `sqlite3 /workspace/t.db "create table t(n integer); insert into t values (20), (22); select sum(n) from t;"`)
		if out != "42\n" {
			t.Fatalf("got %q, want 42", out)
		}
	})

	t.Run("root disk is disk_gib", func(t *testing.T) {
		out := sh(t, "df -B1M --output=size / | tail -1")
		mib, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil || mib < 1900 || mib > 2100 {
			t.Fatalf("got a %q MiB root, want about 2048", out)
		}
		status, body := call(t, s, s.Key, "GET", "/v1/sandboxes/"+sb.ID, nil)
		var got api.Sandbox
		if status != http.StatusOK || json.Unmarshal(body, &got) != nil || got.DiskGiB != 2 {
			t.Fatalf("get: %d %s, want disk_gib 2", status, body)
		}
	})
}

func TestDiskGiBLimits(t *testing.T) {
	s := testenv.StartServer(t)
	for _, body := range []string{`{"disk_gib":0}`, `{"disk_gib":-1}`, `{"disk_gib":101}`, `{"disk_gib":2.5}`, `{"disk_gib":"2"}`} {
		status, resp := call(t, s, s.Key, "POST", "/v1/sandboxes", strings.NewReader(body))
		if status != http.StatusBadRequest || errorCode(resp) != "invalid_request" {
			t.Errorf("%s: got %d %s, want 400 invalid_request", body, status, resp)
		}
	}
}
