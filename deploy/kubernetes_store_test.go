package deploy

import (
	"net/url"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestStoreConnectionVerified: the store URL verifies the database's
// certificate and name (sslmode=verify-full against a CA file) and takes
// the password only over SCRAM, and every pod that connects has that CA
// file, from the Secret.
func TestStoreConnectionVerified(t *testing.T) {
	m := load(t)
	s := m.store
	raw := s.StringData["WITHRUNTIME_STORE"]
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("WITHRUNTIME_STORE: %v", err)
	}
	q := u.Query()
	if got := q.Get("sslmode"); got != "verify-full" {
		t.Errorf("sslmode: got %q, want verify-full (require checks no certificate: a man in the middle gets the password)", got)
	}
	if got := q.Get("require_auth"); got != "scram-sha-256" {
		t.Errorf("require_auth: got %q, want scram-sha-256", got)
	}
	ca := q.Get("sslrootcert")
	if !path.IsAbs(ca) {
		t.Fatalf("sslrootcert: got %q, want the absolute path of the mounted CA", ca)
	}
	pods := map[string]corev1.PodSpec{
		"API servers": m.deployments[0].Spec.Template.Spec,
		"nodes":       m.daemonSets[0].Spec.Template.Spec,
	}
	for who, spec := range pods {
		c := onlyContainer(t, spec)
		if !caMounted(c, spec, s, ca) {
			t.Errorf("%s: %s is not a file of Secret %s mounted read-only", who, ca, s.Name)
		}
	}
}

// caMounted reports whether file is, in container c, a key of secret
// through a read-only volume mount.
func caMounted(c corev1.Container, spec corev1.PodSpec, secret *corev1.Secret, file string) bool {
	for _, vm := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok || !vm.ReadOnly {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil || v.Secret.SecretName != secret.Name {
				continue
			}
			for _, it := range v.Secret.Items {
				if _, inSecret := secret.StringData[it.Key]; it.Path == rel && inSecret {
					return true
				}
			}
		}
	}
	return false
}
