package egress

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// maxSandboxCAFile bounds a file of extra roots: a bundle of every root
// on the web is about 200 KiB.
const maxSandboxCAFile = 4 << 20

// ReadSandboxCA reads a PEM file of certificates that every sandbox is to
// trust (serve --sandbox-ca: the root of a TLS-inspecting proxy, a
// company's own authority) and returns them re-encoded, certificates
// only. Every sandbox can read what it returns, so anything but
// certificates is refused rather than skipped: a private key given by
// mistake must never reach a sandbox. A file with no certificate, or one
// that does not parse, is refused too.
func ReadSandboxCA(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() > maxSandboxCAFile {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a file of certificates may hold", path, fi.Size(), maxSandboxCAFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := parseSandboxCA(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// parseSandboxCA is ReadSandboxCA's check of the file's contents.
func parseSandboxCA(b []byte) ([]byte, error) {
	var out []byte
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %s, want only CERTIFICATE blocks (every sandbox can read them)", n, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})...)
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate in it (want -----BEGIN CERTIFICATE----- blocks)")
	}
	return out, nil
}
