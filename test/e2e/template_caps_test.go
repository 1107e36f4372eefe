package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/withruntime/withruntime/internal/testenv"
)

// TestTemplateFileCapabilities: an image's file capabilities are dropped
// by the import, so the image's programs run in the sandbox. Kept, they
// would not: gVisor honours them at exec as Linux does, runsc takes
// CAP_NET_RAW out of the sandbox's bounding set, and a file whose
// capabilities have the effective bit but cannot all be granted is not
// executed (EPERM, for root too): ping, cap_net_raw+ep in most images
// that have it, would not start. The image's capprobe carries just that.
func TestTemplateFileCapabilities(t *testing.T) {
	// The image's one program: testdata/imgprobe, static (the image has no
	// libc), which prints the files it is named.
	probe := filepath.Join(t.TempDir(), "imgprobe")
	if out, err := exec.Command("env", "CGO_ENABLED=0", "go", "build", "-o", probe, "./testdata/imgprobe").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	// security.capability, revision 2, effective, permitted CAP_NET_RAW (13).
	caps := binary.LittleEndian.AppendUint32(nil, 0x02000001)
	for _, w := range []uint32{1 << 13, 0, 0, 0} {
		caps = binary.LittleEndian.AppendUint32(caps, w)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "bin/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "bin/imgprobe", Mode: 0o755, Size: int64(len(bin))},
		{Typeflag: tar.TypeReg, Name: "bin/capprobe", Mode: 0o755, Size: int64(len(bin)), PAXRecords: map[string]string{"SCHILY.xattr.security.capability": string(caps)}},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bin)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	archive := imageArchive(t, v1.Config{Env: []string{"PATH=/bin"}, Cmd: []string{"/bin/imgprobe", "start"}}, layer)

	s := testenv.StartServer(t)
	env := s.Env()
	if out, errs, code := cli(t, env, "template", "import", "-t", "caps:v1", archive); code != 0 {
		t.Fatalf("template import: exit %d\n%s\n%s", code, out, errs)
	}
	st, sb, code := sbx{t, s, s.Key}.create(`{"template":"caps:v1","vcpus":1,"memory_mib":512}`)
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s\nserver log:\n%s", st, code, s.Log)
	}
	t.Cleanup(func() { call(t, s, s.Key, "DELETE", "/v1/sandboxes/"+sb.ID, nil) })
	for _, u := range []string{"root", "user"} {
		out, errs, code := cli(t, env, "sandbox", "exec", sb.ID, "--user", u, "--", "/bin/capprobe", "/proc/self/status")
		if code != 0 || !strings.Contains(out, "CapBnd:") {
			t.Errorf("capprobe as %s: exit %d\n%s\n%s", u, code, out, errs)
		}
		// CAP_NET_RAW is not the sandbox's to hold: what made keeping the
		// image's cap_net_raw+ep fatal.
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "CapBnd:\t"); ok {
				if bnd, err := strconv.ParseUint(v, 16, 64); err != nil || bnd&(1<<13) != 0 {
					t.Errorf("as %s: the bounding set %q holds CAP_NET_RAW (%v): keeping file capabilities may be worth it now", u, v, err)
				}
			}
		}
	}
	if out, _, code := cli(t, env, "sandbox", "exec", sb.ID, "--user", "user", "--", "/bin/capprobe", "/proc/self/status"); code != 0 || !strings.Contains(out, "CapPrm:\t0000000000000000") {
		t.Errorf("capprobe as the sandbox user: exit %d, it gained capabilities:\n%s", code, out)
	}
}
