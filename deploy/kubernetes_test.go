package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const k8sDir = "kubernetes"

// kinds are the objects the manifests may hold, by apiVersion/kind. Any
// other kind fails: the manifests stay plain, with no cloud resource.
var kinds = map[string]func() any{
	"v1/Namespace":                  func() any { return &corev1.Namespace{} },
	"v1/Secret":                     func() any { return &corev1.Secret{} },
	"v1/Service":                    func() any { return &corev1.Service{} },
	"v1/PersistentVolumeClaim":      func() any { return &corev1.PersistentVolumeClaim{} },
	"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
	"apps/v1/DaemonSet":             func() any { return &appsv1.DaemonSet{} },
	"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
}

// kustomization is the part of kustomize's file the manifests use; strict
// decoding refuses anything else.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: got %s %s, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	return k
}

// splitDocuments splits multi-document YAML, dropping documents that hold
// only comments.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue
		}
		docs = append(docs, doc)
	}
}

// decode decodes one document strictly into the type its apiVersion and
// kind name.
func decode(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	mk, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown kind %q of apiVersion %q", tm.Kind, tm.APIVersion)
	}
	obj := mk()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

// decodeFile decodes every document of one manifest file.
func decodeFile(data []byte) ([]any, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, errors.New("no document")
	}
	var objs []any
	for i, d := range docs {
		obj, err := decode(d)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// Secrets the manifests hold, by name.
const (
	storeSecret     = "withruntime-store"
	authoritySecret = "withruntime-authority"
)

// manifests decodes every file kustomization.yaml lists.
type manifests struct {
	namespaces []*corev1.Namespace
	secrets    []*corev1.Secret
	// store is what API servers and nodes read (the store's credentials),
	// authority what only API servers read (the authority's seal key).
	store, authority *corev1.Secret
	services         []*corev1.Service
	deployments      []*appsv1.Deployment
	daemonSets       []*appsv1.DaemonSet
	all              []metav1.Object
}

func load(t *testing.T) manifests {
	t.Helper()
	var m manifests
	for _, f := range readKustomization(t).Resources {
		data, err := os.ReadFile(filepath.Join(k8sDir, f))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeFile(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			m.all = append(m.all, o.(metav1.Object))
			switch o := o.(type) {
			case *corev1.Namespace:
				m.namespaces = append(m.namespaces, o)
			case *corev1.Secret:
				m.secrets = append(m.secrets, o)
				switch o.Name {
				case storeSecret:
					m.store = o
				case authoritySecret:
					m.authority = o
				}
			case *corev1.Service:
				m.services = append(m.services, o)
			case *appsv1.Deployment:
				m.deployments = append(m.deployments, o)
			case *appsv1.DaemonSet:
				m.daemonSets = append(m.daemonSets, o)
			}
		}
	}
	if len(m.namespaces) != 1 || len(m.secrets) != 2 || len(m.services) != 1 || len(m.deployments) != 1 || len(m.daemonSets) != 1 {
		t.Fatalf("got %d namespaces, %d secrets, %d services, %d deployments, %d daemon sets; want two secrets and one of each other",
			len(m.namespaces), len(m.secrets), len(m.services), len(m.deployments), len(m.daemonSets))
	}
	if m.store == nil || m.authority == nil {
		t.Fatalf("got secrets %s and %s, want %s and %s", m.store.Name, m.secrets[1].Name, storeSecret, authoritySecret)
	}
	return m
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	k := readKustomization(t)
	listed := map[string]bool{}
	for _, f := range k.Resources {
		if listed[f] {
			t.Errorf("%s listed twice", f)
		}
		listed[f] = true
		if _, err := os.Stat(filepath.Join(k8sDir, f)); err != nil {
			t.Errorf("listed resource: %v", err)
		}
	}
	entries, err := os.ReadDir(k8sDir)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || n == "kustomization.yaml" || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		found = append(found, n)
		if !listed[n] {
			t.Errorf("%s is not listed in kustomization.yaml", n)
		}
	}
	sort.Strings(found)
	if len(found) < 4 {
		t.Fatalf("got manifests %v, want at least namespace, secret, api and node", found)
	}
	for _, img := range k.Images {
		if img.Name != "withruntime" {
			t.Errorf("images: got %q, want the placeholder withruntime", img.Name)
		}
	}
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	ns := m.namespaces[0].Name
	if got := m.namespaces[0].Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
		t.Errorf("namespace's pod security: got %q, want privileged (the node daemons are privileged)", got)
	}
	for _, o := range m.all {
		if _, isNS := o.(*corev1.Namespace); isNS {
			continue
		}
		if o.GetNamespace() != ns {
			t.Errorf("%s: got namespace %q, want %q", o.GetName(), o.GetNamespace(), ns)
		}
	}
}

// The negative side of strict decoding: each edit must make decoding fail,
// or a typo in a manifest would be dropped silently.
func TestStrictDecodingRefusesMistakes(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new string
	}{
		{"misspelt container field", "api.yaml", "containerPort:", "containerPrt:"},
		{"misspelt metadata", "api.yaml", "metadata:", "metdata:"},
		{"misspelt volume mount field", "node.yaml", "mountPropagation:", "mountPropogation:"},
		{"field of another type", "node.yaml", "hostPID: true", "hostPID: \"yes\""},
		{"unknown kind", "node.yaml", "kind: DaemonSet", "kind: DaemonSett"},
		{"duplicate field", "secret.yaml", "type: Opaque", "type: Opaque\ntype: Opaque"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(k8sDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeFile(data); err != nil {
				t.Fatalf("the unedited %s: %v", tc.file, err)
			}
			if !bytes.Contains(data, []byte(tc.old)) {
				t.Fatalf("%s has no %q to edit", tc.file, tc.old)
			}
			edited := bytes.Replace(data, []byte(tc.old), []byte(tc.new), 1)
			_, err = decodeFile(edited)
			if err == nil {
				t.Fatalf("%s with %q for %q: decoded, want an error", tc.file, tc.new, tc.old)
			}
			t.Logf("refused: %v", err)
		})
	}
}

func onlyContainer(t *testing.T, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(spec.Containers))
	}
	return spec.Containers[0]
}

// envFromSecret checks that the container's env var name comes from a key
// of the manifests' Secret.
func envFromSecret(t *testing.T, c corev1.Container, secret *corev1.Secret, name string) {
	t.Helper()
	for _, e := range c.Env {
		if e.Name != name {
			continue
		}
		ref := e.ValueFrom
		if ref == nil || ref.SecretKeyRef == nil {
			t.Errorf("%s: env %s does not come from a Secret", c.Name, name)
			return
		}
		if ref.SecretKeyRef.Name != secret.Name {
			t.Errorf("%s: env %s from Secret %q, want %q", c.Name, name, ref.SecretKeyRef.Name, secret.Name)
		}
		if _, ok := secret.StringData[ref.SecretKeyRef.Key]; !ok {
			t.Errorf("%s: env %s from key %q, which Secret %s does not have", c.Name, name, ref.SecretKeyRef.Key, secret.Name)
		}
		return
	}
	t.Errorf("%s: no env %s", c.Name, name)
}

func TestSecretHoldsAStoreURL(t *testing.T) {
	s := load(t).store
	url := s.StringData["WITHRUNTIME_STORE"]
	if !strings.HasPrefix(url, "postgres://") {
		t.Errorf("WITHRUNTIME_STORE: got %q, want a postgres:// URL", url)
	}
	if strings.Contains(strings.SplitN(strings.TrimPrefix(url, "postgres://"), "@", 2)[0], ":") {
		t.Errorf("WITHRUNTIME_STORE %q has a password: keep it in PGPASSWORD, off the command line", url)
	}
	if _, ok := s.StringData["PGPASSWORD"]; !ok {
		t.Error("no PGPASSWORD in the Secret")
	}
}

func TestAPIDeployment(t *testing.T) {
	m := load(t)
	d := m.deployments[0]
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas: got %v, want 2", d.Spec.Replicas)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the Deployment's selector %v does not match its pods' labels %v", sel, d.Spec.Template.Labels)
	}
	c := onlyContainer(t, d.Spec.Template.Spec)
	cmd, flags := parseArgs(t, c.Args)
	if cmd != "serve" {
		t.Errorf("API servers run %q, want serve", cmd)
	}
	if !slices.Equal(c.Command, []string{"/usr/local/bin/withruntime"}) {
		t.Errorf("command: got %v, want /usr/local/bin/withruntime", c.Command)
	}
	if flags["--store"] != "$(WITHRUNTIME_STORE)" {
		t.Errorf("--store: got %q, want $(WITHRUNTIME_STORE)", flags["--store"])
	}
	envFromSecret(t, c, m.store, "WITHRUNTIME_STORE")
	envFromSecret(t, c, m.store, "PGPASSWORD")
	if !mountedAt(c, flags["--data-dir"]) {
		t.Errorf("--data-dir %s is not a volume: the root file system is read-only", flags["--data-dir"])
	}
	port := containerPort(t, c, "http")
	if !strings.HasSuffix(flags["--listen"], fmt.Sprintf(":%d", port)) {
		t.Errorf("--listen %s is not the container port %d", flags["--listen"], port)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET", name)
			continue
		}
		if p.HTTPGet.Path != healthPath(t) || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe: got %s on %s, want %s on http", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), healthPath(t))
		}
	}
	sc, psc := c.SecurityContext, d.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("API servers must not be privileged nor escalate")
	}
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("API servers must run as a user other than root")
	}
}

// healthPath is the API's health route, read from the server's route table
// so that the probes follow the code.
func healthPath(t *testing.T) string {
	t.Helper()
	routes, err := os.ReadFile(filepath.Join("..", "internal", "httpapi", "routes.go"))
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join("..", "api", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(routes, []byte(`Pattern: api.Version + "/health", Public: true`)) {
		t.Fatal(`internal/httpapi/routes.go has no public api.Version + "/health" route`)
	}
	if !bytes.Contains(version, []byte(`const Version = "/v1"`)) {
		t.Fatal(`api/doc.go: Version is not "/v1"`)
	}
	return "/v1/health"
}

func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("%s: no port named %s", c.Name, name)
	return 0
}

func mountedAt(c corev1.Container, path string) bool {
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == path {
			return true
		}
	}
	return false
}

func TestServiceSelectsAPIPods(t *testing.T) {
	m := load(t)
	svc, d, ds := m.services[0], m.deployments[0], m.daemonSets[0]
	if len(svc.Spec.Selector) == 0 {
		t.Fatal("the Service selects nothing")
	}
	selects := func(pod map[string]string) bool {
		for k, v := range svc.Spec.Selector {
			if pod[k] != v {
				return false
			}
		}
		return true
	}
	if !selects(d.Spec.Template.Labels) {
		t.Errorf("the Service's selector %v does not select the API pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	if selects(ds.Spec.Template.Labels) {
		t.Errorf("the Service's selector %v also selects the node pods %v", svc.Spec.Selector, ds.Spec.Template.Labels)
	}
	c := onlyContainer(t, d.Spec.Template.Spec)
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() != "http" {
			t.Errorf("Service port %s: target %s, want http", p.Name, p.TargetPort.String())
		}
	}
	containerPort(t, c, "http")
}

func TestNodeDaemonSet(t *testing.T) {
	m := load(t)
	ds := m.daemonSets[0]
	spec := ds.Spec.Template.Spec
	c := onlyContainer(t, spec)
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the node container is not privileged")
	}
	if c.SecurityContext == nil || c.SecurityContext.RunAsUser == nil || *c.SecurityContext.RunAsUser != 0 {
		t.Error("the node container does not run as root (the image's user is unprivileged)")
	}
	if !spec.HostNetwork || !spec.HostPID {
		t.Errorf("hostNetwork %v, hostPID %v: want both", spec.HostNetwork, spec.HostPID)
	}
	if spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("dnsPolicy: got %s, want %s", spec.DNSPolicy, corev1.DNSClusterFirstWithHostNet)
	}
	if !slices.Equal(c.Command, []string{"nsenter", "--cgroup=/proc/1/ns/cgroup", "--", "/usr/local/bin/withruntime"}) {
		t.Errorf("command: got %v, want withruntime in the host's cgroup namespace", c.Command)
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, tc := range []struct {
		path        string
		propagation corev1.MountPropagationMode
	}{
		{"/var/cache/withruntime", ""},
		{"/var/lib/withruntime", corev1.MountPropagationBidirectional},
		{"/run/withruntime", corev1.MountPropagationBidirectional},
		{"/sys/fs/cgroup", ""},
	} {
		var mount *corev1.VolumeMount
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].MountPath == tc.path {
				mount = &c.VolumeMounts[i]
			}
		}
		if mount == nil {
			t.Errorf("%s is not mounted", tc.path)
			continue
		}
		v := volumes[mount.Name]
		if v.HostPath == nil || v.HostPath.Path != tc.path {
			t.Errorf("%s: got volume %+v, want the host's %s", tc.path, v.VolumeSource, tc.path)
		}
		var got corev1.MountPropagationMode
		if mount.MountPropagation != nil {
			got = *mount.MountPropagation
		}
		if tc.propagation != "" && got != tc.propagation {
			t.Errorf("%s: propagation %q, want %q", tc.path, got, tc.propagation)
		}
	}

	cmd, flags := parseArgs(t, c.Args)
	if cmd != "node" {
		t.Errorf("node daemons run %q, want node", cmd)
	}
	if flags["--store"] != "$(WITHRUNTIME_STORE)" {
		t.Errorf("--store: got %q, want $(WITHRUNTIME_STORE)", flags["--store"])
	}
	if flags["--data-dir"] != "/var/lib/withruntime" {
		t.Errorf("--data-dir: got %q, want the host path /var/lib/withruntime", flags["--data-dir"])
	}
	port := containerPort(t, c, "rpc")
	if want := fmt.Sprintf("$(POD_IP):%d", port); flags["--advertise"] != want {
		t.Errorf("--advertise: got %q, want %q", flags["--advertise"], want)
	}
	if !strings.HasSuffix(flags["--listen"], fmt.Sprintf(":%d", port)) {
		t.Errorf("--listen %s is not the rpc port %d", flags["--listen"], port)
	}
	podIP := false
	for _, e := range c.Env {
		if e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
			podIP = true
		}
	}
	if !podIP {
		t.Error("no POD_IP from status.podIP (the downward API)")
	}
	envFromSecret(t, c, m.store, "WITHRUNTIME_STORE")
	envFromSecret(t, c, m.store, "PGPASSWORD")
}

// The commented shared-checkpoint lines of node.yaml, uncommented as
// docs/DEPLOY.md says, make a DaemonSet that mounts the directory and
// passes it with --shared-checkpoints.
func TestSharedCheckpointsExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(k8sDir, "node.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Indented "# - " and "#   " lines are the example; prose comments
	// start with a word, the file's header at the first column.
	commented := regexp.MustCompile(`(?m)^(\s{8,})# ((?:- |  ).*)$`)
	if n := len(commented.FindAll(data, -1)); n != 8 {
		t.Fatalf("got %d commented example lines, want 8 (2 arguments, 2 of the mount, 4 of the volume)", n)
	}
	objs, err := decodeFile(commented.ReplaceAll(data, []byte("$1$2")))
	if err != nil {
		t.Fatalf("node.yaml uncommented: %v", err)
	}
	ds := objs[0].(*appsv1.DaemonSet)
	c := onlyContainer(t, ds.Spec.Template.Spec)
	_, flags := parseArgs(t, c.Args)
	dir := flags["--shared-checkpoints"]
	if dir == "" || !mountedAt(c, dir) {
		t.Fatalf("--shared-checkpoints %q: want a directory the container mounts", dir)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "checkpoints" && (v.NFS == nil || v.NFS.Server == "" || v.NFS.Path == "") {
			t.Errorf("volume checkpoints: got %+v, want an NFS export", v.VolumeSource)
		}
	}
}
