package e2bcompat

import (
	"strings"
	"time"

	"github.com/withruntime/withruntime/api"
)

// The control plane's JSON shapes (e2b-protocol §1.5, §1.6): camelCase
// with ID capitalised, except allow_internet_access in requests.

// sandboxAnswer is E2B's Sandbox: the create and connect answer.
type sandboxAnswer struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken string  `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// sandboxDetail is E2B's SandboxDetail (GET /sandboxes/{id}) and, without
// the detail-only fields, its ListedSandbox.
type sandboxDetail struct {
	TemplateID          string            `json:"templateID"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	EnvdVersion         string            `json:"envdVersion"`
	StartedAt           string            `json:"startedAt"`
	EndAt               string            `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	State               string            `json:"state"`
	Metadata            map[string]string `json:"metadata"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
	Domain              *string           `json:"domain,omitempty"`
	Lifecycle           *lifecycle        `json:"lifecycle,omitempty"`
	VolumeMounts        []volumeMount     `json:"volumeMounts,omitempty"`
}

// lifecycle is what happens at the lease's end.
type lifecycle struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// defaultTemplate is the template a sandbox of the default image reports:
// every E2B template name of it (base, code-interpreter-v1) is that image.
const defaultTemplate = "base"

// templateOf is the E2B template id of a sandbox: its template's name
// (with its tag unless latest), or base for the default image.
func templateOf(sb *api.Sandbox) string {
	if sb.Template == "" || sb.Template == "default" {
		return defaultTemplate
	}
	return strings.TrimSuffix(sb.Template, ":latest")
}

// e2bState is E2B's state of a sandbox that has not ended: "running" or
// "paused" (a starting one is running for E2B, which has no such state).
func e2bState(sb *api.Sandbox) string {
	if sb.State == "paused" {
		return "paused"
	}
	return "running"
}

func (s *Server) answerOf(sb *api.Sandbox, template, key string) sandboxAnswer {
	tok := s.sealToken(sb.ID, key)
	if template == "" {
		template = defaultTemplate
	}
	return sandboxAnswer{
		TemplateID: template, SandboxID: sb.ID, ClientID: clientID, EnvdVersion: EnvdVersion,
		EnvdAccessToken: tok, TrafficAccessToken: tok, Domain: s.domain(),
	}
}

// domain is the domain clients build sandbox hosts under: none without
// --e2b-domain (they then use E2B_SANDBOX_URL or E2B_DOMAIN).
func (s *Server) domain() *string {
	if s.cfg.Domain == "" {
		return nil
	}
	d := s.cfg.Domain
	return &d
}

func (s *Server) detailOf(sb *api.Sandbox, key string, detail bool) sandboxDetail {
	started := sb.CreatedAt
	if sb.StartedAt != nil {
		started = *sb.StartedAt
	}
	md := sb.Metadata
	if md == nil {
		md = map[string]string{}
	}
	d := sandboxDetail{
		TemplateID: templateOf(sb), SandboxID: sb.ID, ClientID: clientID, EnvdVersion: EnvdVersion,
		StartedAt: started.UTC().Format(time.RFC3339Nano), EndAt: sb.LeaseEndsAt.UTC().Format(time.RFC3339Nano),
		CPUCount: sb.VCPUs, MemoryMB: sb.MemoryMiB, DiskSizeMB: sb.DiskGiB * 1024,
		State: e2bState(sb), Metadata: md,
	}
	if detail {
		internet := sb.Network.Internet
		onTimeout := "kill"
		if sb.OnLeaseEnd == "pause" {
			onTimeout = "pause"
		}
		d.EnvdAccessToken = s.sealToken(sb.ID, key)
		d.AllowInternetAccess = &internet
		d.Domain = s.domain()
		d.Lifecycle = &lifecycle{OnTimeout: onTimeout, AutoResume: sb.AutoResume}
		for _, m := range sb.Volumes {
			d.VolumeMounts = append(d.VolumeMounts, volumeMount{Name: m.Name, Path: m.Path})
		}
	}
	return d
}
