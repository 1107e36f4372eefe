package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The key the installation's authority is sealed with goes to API servers
// and never to a node: a node holding it could issue itself the API
// servers' identity and drive every other node.

// authorityKeyEnv is the variable an API server reads the seal key from,
// read from the server's code so that the deployments follow it.
func authorityKeyEnv(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "internal", "server", "authority.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const authorityKeyEnv = "([A-Z_]+)"$`).FindSubmatch(src)
	if m == nil {
		t.Fatal(`internal/server/authority.go has no const authorityKeyEnv = "..."`)
	}
	return string(m[1])
}

// authorityProblems lists how m fails to give the seal key (env) to the
// API servers and to them only.
func authorityProblems(m manifests, env string) []string {
	var p []string
	if _, ok := m.authority.StringData[env]; !ok {
		p = append(p, "Secret "+m.authority.Name+" has no "+env)
	}
	if _, ok := m.store.StringData[env]; ok {
		p = append(p, "Secret "+m.store.Name+", which the nodes read, has "+env)
	}

	api := m.deployments[0].Spec.Template.Spec
	got := false
	for _, c := range api.Containers {
		for _, e := range c.Env {
			if e.Name != env {
				continue
			}
			ref := e.ValueFrom
			if ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != m.authority.Name || ref.SecretKeyRef.Key != env {
				p = append(p, "API servers: env "+env+" does not come from key "+env+" of Secret "+m.authority.Name)
			} else if o := ref.SecretKeyRef.Optional; o != nil && *o {
				p = append(p, "API servers: env "+env+" is optional: a replica without it would make a key of its own")
			} else {
				got = true
			}
		}
	}
	if !got {
		p = append(p, "API servers: no env "+env+" from Secret "+m.authority.Name)
	}

	node := m.daemonSets[0].Spec.Template.Spec
	for _, c := range slices.Concat(node.InitContainers, node.Containers) {
		for _, e := range c.Env {
			if e.Name == env {
				p = append(p, "nodes: container "+c.Name+" has env "+env)
			}
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Name == m.authority.Name {
				p = append(p, "nodes: container "+c.Name+" reads Secret "+m.authority.Name+" into "+e.Name)
			}
		}
		for _, ef := range c.EnvFrom {
			if ef.SecretRef != nil && ef.SecretRef.Name == m.authority.Name {
				p = append(p, "nodes: container "+c.Name+" takes its env from Secret "+m.authority.Name)
			}
		}
	}
	for _, v := range node.Volumes {
		if v.Secret != nil && v.Secret.SecretName == m.authority.Name {
			p = append(p, "nodes: volume "+v.Name+" is Secret "+m.authority.Name)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == m.authority.Name {
					p = append(p, "nodes: volume "+v.Name+" projects Secret "+m.authority.Name)
				}
			}
		}
	}
	return p
}

func TestAuthorityKeyOnlyForAPIServers(t *testing.T) {
	env := authorityKeyEnv(t)
	if p := authorityProblems(load(t), env); len(p) > 0 {
		t.Fatalf("the manifests: got %q, want no problem", p)
	}

	// Each edit must be caught: the check is what keeps the key off nodes.
	yes := true
	fromAuthority := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: authoritySecret}, Key: env}}
	for _, tc := range []struct {
		name string
		edit func(m manifests)
	}{
		{"api.yaml loses the env", func(m manifests) {
			c := &m.deployments[0].Spec.Template.Spec.Containers[0]
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == env })
		}},
		{"api.yaml reads it from the store's Secret", func(m manifests) {
			for _, e := range m.deployments[0].Spec.Template.Spec.Containers[0].Env {
				if e.Name == env {
					e.ValueFrom.SecretKeyRef.Name = storeSecret
				}
			}
		}},
		{"api.yaml makes it optional", func(m manifests) {
			for _, e := range m.deployments[0].Spec.Template.Spec.Containers[0].Env {
				if e.Name == env {
					e.ValueFrom.SecretKeyRef.Optional = &yes
				}
			}
		}},
		{"node.yaml gains the env", func(m manifests) {
			c := &m.daemonSets[0].Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: env, ValueFrom: fromAuthority})
		}},
		{"node.yaml gains it under another name", func(m manifests) {
			c := &m.daemonSets[0].Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "SEAL", ValueFrom: fromAuthority})
		}},
		{"node.yaml takes the Secret as envFrom", func(m manifests) {
			c := &m.daemonSets[0].Spec.Template.Spec.Containers[0]
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: authoritySecret}}})
		}},
		{"node.yaml mounts the Secret", func(m manifests) {
			s := &m.daemonSets[0].Spec.Template.Spec
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "seal", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: authoritySecret}}})
		}},
		{"the key moves to the store's Secret", func(m manifests) {
			m.store.StringData[env] = m.authority.StringData[env]
			delete(m.authority.StringData, env)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t)
			tc.edit(m)
			p := authorityProblems(m, env)
			if len(p) == 0 {
				t.Fatal("got no problem, want the edit caught")
			}
			t.Logf("caught: %q", p)
		})
	}
}

// TestAuthorityKeyNotInNodeEnvironment: on systemd hosts the seal key
// goes in an environment file only the API unit reads; the file every
// host shares says never to hold it, and holds no line of it.
func TestAuthorityKeyNotInNodeEnvironment(t *testing.T) {
	env := authorityKeyEnv(t)
	shared := "/etc/withruntime/withruntime.env"
	apiOnly := "-/etc/withruntime/withruntime-api.env"

	if got, want := readUnit(t, apiUnit)["Service"]["EnvironmentFile"], []string{shared, apiOnly}; !slices.Equal(got, want) {
		t.Errorf("%s: EnvironmentFile got %q, want %q (the API-only file optional, and last so that it wins)", apiUnit, got, want)
	}
	if got, want := readUnit(t, nodeUnit)["Service"]["EnvironmentFile"], []string{shared}; !slices.Equal(got, want) {
		t.Errorf("%s: EnvironmentFile got %q, want %q only", nodeUnit, got, want)
	}

	if _, ok := readEnv(t)[env]; ok {
		t.Errorf("%s sets %s (commented or not): node hosts read that file", envSample, env)
	}
	data, err := os.ReadFile(filepath.Join(unitDir, envSample))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "Never put "+env) {
		t.Errorf("%s does not say: Never put %s in it", envSample, env)
	}
}
