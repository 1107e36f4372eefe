package webhooks

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/withruntime/withruntime/internal/sandbox"
)

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	var c Checker
	for _, u := range []string{
		"http://127.0.0.1/hook",
		"http://127.0.0.2:8080/hook",
		"http://[::1]/hook",
		"http://169.254.169.254/latest/meta-data",
		"http://10.1.2.3/",
		"http://192.168.1.1/",
		"http://172.16.0.1/",
		"http://100.64.0.1/",
		"http://0.0.0.0/",
		"http://[::]/",
		"http://224.0.0.1/",
		"http://[fe80::1]/",
		"http://[fd00::1]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::ffff:169.254.169.254]/",
		"http://localhost/hook", // a name that resolves to loopback
		"ftp://203.0.113.1/",
		"file:///etc/passwd",
		"https://user:pw@203.0.113.1/",
		"http:///nohost",
		"not a url",
	} {
		if err := c.CheckURL(ctx, u); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("CheckURL(%s) = %v, want invalid_request", u, err)
		}
	}
	for _, u := range []string{"https://203.0.113.7/hook", "http://8.8.8.8:8080/x", "https://[2606:4700::1]/"} {
		if err := c.CheckURL(ctx, u); err != nil {
			t.Errorf("CheckURL(%s) = %v, want allowed", u, err)
		}
	}
	// A name is checked by what it resolves to.
	r := Checker{Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("10.0.0.1")}, nil
	}}
	if err := r.CheckURL(ctx, "https://hooks.example.test/"); err == nil {
		t.Error("a name with one private address was allowed")
	}

	permitted := Checker{Permit: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	for _, u := range []string{"http://127.0.0.1:9/hook", "http://localhost:9/hook"} {
		if err := permitted.CheckURL(ctx, u); err != nil {
			t.Errorf("with --webhook-permit 127.0.0.0/8, CheckURL(%s) = %v", u, err)
		}
	}
	if err := permitted.CheckURL(ctx, "http://169.254.169.254/"); err == nil {
		t.Error("a permit of loopback let metadata through")
	}
}

// TestDialRefused: the delivery client refuses a refused address at the
// dial itself, whatever the URL said at registration.
func TestDialRefused(t *testing.T) {
	cl := NewClient(&Checker{}, DefaultTimeout)
	_, err := cl.Get("http://127.0.0.1:1/")
	if err == nil || !strings.Contains(err.Error(), "may not reach") {
		t.Fatalf("dial of loopback: %v, want refused by the checker", err)
	}
}
