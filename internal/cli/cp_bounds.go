package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/withruntime/withruntime/client"
)

// cpBounds are the bounds of a download by "sandbox cp": what comes out
// of a sandbox is untrusted, so its size is bounded unless the user
// raises the bounds.
type cpBounds struct {
	maxBytes   sizeValue
	maxEntries int
}

func cpBoundFlags(fs *pflag.FlagSet) *cpBounds {
	b := &cpBounds{maxBytes: sizeValue(client.DefaultDownloadMaxBytes)}
	fs.Var(&b.maxBytes, "max-bytes", "from a sandbox: write at most `SIZE` bytes of files (of the tar stream with DST -); K, M, G, T suffixes are powers of 1024")
	fs.IntVar(&b.maxEntries, "max-entries", client.DefaultDownloadMaxEntries, "from a sandbox: extract at most this many files, directories and links")
	return b
}

func (b *cpBounds) options() []client.DownloadOption {
	return []client.DownloadOption{client.DownloadMaxBytes(int64(b.maxBytes)), client.DownloadMaxEntries(b.maxEntries)}
}

// copyStream writes the archive to w, at most max bytes of it.
func copyStream(w io.Writer, r io.Reader, max int64) error {
	n, err := io.Copy(w, io.LimitReader(r, max))
	if err != nil {
		return err
	}
	if n == max {
		var one [1]byte
		if m, _ := r.Read(one[:]); m > 0 {
			return fmt.Errorf("%w: the tar stream is over %d bytes", client.ErrArchiveTooLarge, max)
		}
	}
	return nil
}

// sizeValue is a flag of bytes: a positive count, with an optional K, M,
// G or T (KiB, MiB, GiB, TiB also read).
type sizeValue int64

// String gives the size with the largest suffix that keeps it exact.
func (v *sizeValue) String() string {
	n, suffix := int64(*v), ""
	for _, s := range []string{"K", "M", "G", "T"} {
		if n == 0 || n%1024 != 0 {
			break
		}
		n, suffix = n/1024, s
	}
	return strconv.FormatInt(n, 10) + suffix
}

func (v *sizeValue) Type() string { return "size" }

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

func parseSize(s string) (int64, error) {
	num := strings.TrimRight(strings.TrimSuffix(strings.ToUpper(s), "IB"), "KMGT")
	shift := 0
	if suffix := strings.TrimSuffix(strings.ToUpper(s), "IB")[len(num):]; suffix != "" {
		if len(suffix) != 1 {
			return 0, errors.New("want a number of bytes such as 20G")
		}
		shift = 10 * (1 + strings.Index("KMGT", suffix))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case err != nil:
		return 0, errors.New("want a number of bytes such as 20G")
	case n <= 0:
		return 0, errors.New("must be positive")
	case n > (1<<63-1)>>shift:
		return 0, errors.New("too large")
	}
	return n << shift, nil
}
