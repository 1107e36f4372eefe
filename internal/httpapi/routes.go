package httpapi

import (
	"net/http"

	"github.com/withruntime/withruntime/api"
)

// Route is one entry of the server's route table. The table is data so that
// tests can hold it to api/openapi.yaml and check auth on every entry.
type Route struct {
	Method string
	// Pattern is an http.ServeMux path pattern, such as
	// /v1/sandboxes/{id}/files; OpenAPI spells paths the same way.
	Pattern string
	// Public routes are served without a key.
	Public bool
	// Mutating routes create, execute, write, change or spend: read-only
	// keys are refused them.
	Mutating bool
	// Admin routes are for the admin key only: other keys are refused them.
	Admin bool
	// WebSocket routes also take the key as a subprotocol of the
	// handshake (api.PtyBearerPrefix), which browsers can send.
	WebSocket bool

	handler handlerFunc
}

// handlerFunc serves one route for an authenticated caller (the zero
// caller on public routes). A returned error is answered by writeError.
type handlerFunc func(s *server, w http.ResponseWriter, r *http.Request, c caller) error

const sandboxPrefix = api.Version + "/sandboxes/{id}"

// MCPPattern is the MCP endpoint (mcp.go).
const MCPPattern = api.Version + "/mcp"

// Routes returns the server's route table, in the order of api/routes.go.
func Routes() []Route {
	return []Route{
		{Method: http.MethodGet, Pattern: api.Version + "/health", Public: true, handler: (*server).health},

		{Method: http.MethodPost, Pattern: api.Version + "/sandboxes", Mutating: true, handler: (*server).create},
		{Method: http.MethodGet, Pattern: api.Version + "/sandboxes", handler: (*server).list},
		{Method: http.MethodGet, Pattern: sandboxPrefix, handler: (*server).get},
		{Method: http.MethodDelete, Pattern: sandboxPrefix, Mutating: true, handler: (*server).stop},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/stop", Mutating: true, handler: (*server).stop},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/extend", Mutating: true, handler: (*server).extend},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/pause", Mutating: true, handler: (*server).pause},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/resume", Mutating: true, handler: (*server).resume},

		{Method: http.MethodPost, Pattern: sandboxPrefix + "/exec", Mutating: true, handler: (*server).exec},
		agentRoute(http.MethodGet, "/processes", bodyJSON),
		agentRoute(http.MethodGet, "/processes/{pid}", bodyJSON),
		agentRoute(http.MethodPost, "/processes/{pid}/kill", bodyJSON),
		agentRoute(http.MethodPost, "/processes/{pid}/stdin", bodyStdin),
		agentRoute(http.MethodPost, "/processes/{pid}/resize", bodyJSON),
		// A WebSocket: a GET that writes (keystrokes), so read-only keys
		// are refused it.
		{Method: http.MethodGet, Pattern: sandboxPrefix + "/pty", Mutating: true, WebSocket: true, handler: (*server).pty},
		agentRoute(http.MethodGet, "/processes/{pid}/stream", bodyJSON),
		agentRoute(http.MethodGet, "/files", bodyJSON),
		agentRoute(http.MethodPut, "/files", bodyFile),
		agentRoute(http.MethodDelete, "/files", bodyJSON),
		agentRoute(http.MethodGet, "/files/list", bodyJSON),
		agentRoute(http.MethodGet, "/files/stat", bodyJSON),
		agentRoute(http.MethodPost, "/files/mkdir", bodyJSON),
		agentRoute(http.MethodGet, "/archive", bodyJSON),
		agentRoute(http.MethodPut, "/archive", bodyArchive),
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/code", Mutating: true, handler: (*server).runCode},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/contexts", Mutating: true, handler: (*server).createContext},
		agentRoute(http.MethodGet, "/contexts", bodyJSON),
		agentRoute(http.MethodPost, "/contexts/{cid}/restart", bodyJSON),
		agentRoute(http.MethodDelete, "/contexts/{cid}", bodyJSON),
		{Method: http.MethodGet, Pattern: sandboxPrefix + "/network", handler: (*server).getNetwork},
		{Method: http.MethodPut, Pattern: sandboxPrefix + "/network", Mutating: true, handler: (*server).setNetwork},
		{Method: http.MethodGet, Pattern: sandboxPrefix + "/egress", handler: (*server).egressLog},
		{Method: http.MethodGet, Pattern: sandboxPrefix + "/metrics", handler: (*server).sandboxMetrics},
		{Method: http.MethodGet, Pattern: sandboxPrefix + "/previews", handler: (*server).listPreviews},
		{Method: http.MethodPut, Pattern: sandboxPrefix + "/previews", Mutating: true, handler: (*server).setPreviews},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/previews/revoke", Mutating: true, handler: (*server).revokePreviews},
		{Method: http.MethodGet, Pattern: sandboxPrefix + "/previews/{port}", handler: (*server).getPreview},
		{Method: http.MethodPut, Pattern: sandboxPrefix + "/previews/{port}", Mutating: true, handler: (*server).setPreview},
		// A WebSocket carrying a TCP connection's bytes both ways.
		{Method: http.MethodGet, Pattern: sandboxPrefix + "/port-forward/{port}", Mutating: true, handler: (*server).portForward},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/snapshot", Mutating: true, handler: (*server).snapshot},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/snapshots", Mutating: true, handler: (*server).createSnapshot},
		{Method: http.MethodPost, Pattern: sandboxPrefix + "/fork", Mutating: true, handler: (*server).fork},
		{Method: http.MethodGet, Pattern: api.Version + "/snapshots", handler: (*server).listSnapshots},
		{Method: http.MethodGet, Pattern: api.Version + "/snapshots/{sid}", handler: (*server).getSnapshot},
		{Method: http.MethodDelete, Pattern: api.Version + "/snapshots/{sid}", Mutating: true, handler: (*server).deleteSnapshot},
		{Method: http.MethodGet, Pattern: api.Version + "/templates", handler: (*server).listTemplates},
		{Method: http.MethodPost, Pattern: api.Version + "/templates", Mutating: true, handler: (*server).buildTemplate},
		{Method: http.MethodGet, Pattern: api.Version + "/templates/builds/{id}", handler: (*server).getBuild},
		{Method: http.MethodGet, Pattern: api.Version + "/templates/builds/{id}/logs", handler: (*server).buildLogs},
		{Method: http.MethodPost, Pattern: api.Version + "/templates/import", Mutating: true, handler: (*server).importTemplate},
		{Method: http.MethodGet, Pattern: api.Version + "/templates/{name}", handler: (*server).getTemplate},
		{Method: http.MethodDelete, Pattern: api.Version + "/templates/{name}", Mutating: true, handler: (*server).deleteTemplate},
		{Method: http.MethodPost, Pattern: api.Version + "/templates/{name}/publish", Mutating: true, Admin: true, handler: (*server).publishTemplate},

		{Method: http.MethodPost, Pattern: api.Version + "/volumes", Mutating: true, handler: (*server).createVolume},
		{Method: http.MethodGet, Pattern: api.Version + "/volumes", handler: (*server).listVolumes},
		{Method: http.MethodGet, Pattern: api.Version + "/volumes/{name}", handler: (*server).getVolume},
		{Method: http.MethodDelete, Pattern: api.Version + "/volumes/{name}", Mutating: true, handler: (*server).deleteVolume},
		{Method: http.MethodGet, Pattern: api.Version + "/volumes/{name}/files", handler: (*server).readVolumeFile},
		{Method: http.MethodPut, Pattern: api.Version + "/volumes/{name}/files", Mutating: true, handler: (*server).writeVolumeFile},
		{Method: http.MethodDelete, Pattern: api.Version + "/volumes/{name}/files", Mutating: true, handler: (*server).deleteVolumeFile},
		{Method: http.MethodGet, Pattern: api.Version + "/volumes/{name}/archive", handler: (*server).volumeArchiveOut},
		{Method: http.MethodPut, Pattern: api.Version + "/volumes/{name}/archive", Mutating: true, handler: (*server).volumeArchiveIn},
		{Method: http.MethodPut, Pattern: api.Version + "/secrets/{name}", Mutating: true, handler: (*server).setSecret},
		{Method: http.MethodGet, Pattern: api.Version + "/secrets", handler: (*server).listSecrets},
		{Method: http.MethodDelete, Pattern: api.Version + "/secrets/{name}", Mutating: true, handler: (*server).deleteSecret},

		{Method: http.MethodPost, Pattern: api.Version + "/accounts", Mutating: true, Admin: true, handler: (*server).createAccount},
		{Method: http.MethodGet, Pattern: api.Version + "/accounts", Admin: true, handler: (*server).listAccounts},
		{Method: http.MethodPost, Pattern: api.Version + "/keys", Mutating: true, handler: (*server).createKey},
		{Method: http.MethodGet, Pattern: api.Version + "/keys", handler: (*server).listKeys},
		{Method: http.MethodGet, Pattern: api.Version + "/keys/current", handler: (*server).currentKey},
		{Method: http.MethodDelete, Pattern: api.Version + "/keys/{kid}", Mutating: true, handler: (*server).deleteKey},
		{Method: http.MethodGet, Pattern: api.Version + "/usage", handler: (*server).usage},
		{Method: http.MethodPost, Pattern: api.Version + "/webhooks", Mutating: true, handler: (*server).createWebhook},
		{Method: http.MethodGet, Pattern: api.Version + "/webhooks", handler: (*server).listWebhooks},
		{Method: http.MethodDelete, Pattern: api.Version + "/webhooks/{id}", Mutating: true, handler: (*server).deleteWebhook},
		{Method: http.MethodGet, Pattern: api.Version + "/audit", Admin: true, handler: (*server).listAudit},
		{Method: http.MethodPost, Pattern: api.Version + "/trial", Public: true, Mutating: true, handler: (*server).trial},

		// Not mutating: its tools call the routes above in-process, with
		// the caller's key, and those refuse what the key may not do.
		{Method: http.MethodPost, Pattern: MCPPattern, handler: (*server).serveMCP},
	}
}

// bodyLimit says which bound applies to a forwarded request body.
type bodyLimit int

const (
	bodyJSON    bodyLimit = iota // Config.MaxBodyBytes
	bodyFile                     // Config.MaxFileBytes, checked before forwarding
	bodyArchive                  // none here: the sandbox's disk bounds it
	bodyStdin                    // api.MaxStdinBody
)

// agentRoute is a route that the agent serves at suffix: the server checks
// the key and the sandbox, then forwards the request as it is.
func agentRoute(method, suffix string, limit bodyLimit) Route {
	return Route{
		Method:   method,
		Pattern:  sandboxPrefix + suffix,
		Mutating: method != http.MethodGet,
		handler: func(s *server, w http.ResponseWriter, r *http.Request, c caller) error {
			return s.forward(w, r, c, suffix, limit)
		},
	}
}
