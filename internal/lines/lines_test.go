package lines

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/testenv"
)

func scan(sc *bufio.Scanner) ([]string, error) {
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	return got, sc.Err()
}

// TestBound checks lines up to the bound pass, with either line end, and
// a longer one ends the scan with bufio.ErrTooLong, however it is cut.
func TestBound(t *testing.T) {
	five := strings.Repeat("x", 5)
	got, err := scan(New(strings.NewReader("a\n"+five+"\r\n"+five+"\nlast"), 5))
	if err != nil || strings.Join(got, "|") != "a|"+five+"|"+five+"|last" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, in := range []string{"a\n" + five + "x\n", five + "x\r\n", five + "xx", strings.Repeat("y", 1000)} {
		got, err := scan(New(strings.NewReader(in), 5))
		if !errors.Is(err, bufio.ErrTooLong) {
			t.Errorf("%q: got %q, %v, want bufio.ErrTooLong", in, got, err)
		}
	}
	// A bound far over the stream's size reads large lines whole.
	big := strings.Repeat("z", 300<<10)
	if got, err := scan(New(strings.NewReader(big+"\n"), 1<<20)); err != nil || len(got) != 1 || got[0] != big {
		t.Errorf("a 300 KiB line: got %d lines, %v", len(got), err)
	}
}

// TestWhole checks NewWhole refuses a last line without its newline.
func TestWhole(t *testing.T) {
	got, err := scan(NewWhole(strings.NewReader("a\nb"), 5))
	if !errors.Is(err, io.ErrUnexpectedEOF) || strings.Join(got, "|") != "a" {
		t.Errorf("got %q, %v, want a and io.ErrUnexpectedEOF", got, err)
	}
	if got, err := scan(NewWhole(strings.NewReader("a\nb\n"), 5)); err != nil || len(got) != 2 {
		t.Errorf("got %q, %v", got, err)
	}
}

// TestImports fences the package: the sandbox agent imports it, so it
// depends on the standard library alone.
func TestImports(t *testing.T) {
	testenv.CheckImports(t, testenv.StdlibAnd())
}
