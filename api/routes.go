package api

// The routes of the public API. Every route needs "Authorization: Bearer
// KEY" except GET /v1/health. {id} is a sandbox id, {pid} a process id
// inside it, {cid} a code context's id ("default" or "ctx_" and 16 hex
// digits). Query parameter "path" names a file inside the sandbox:
// relative paths are under /workspace. Every files route takes "user"
// ("user", the default, or "root"): what it makes belongs to that user.
//
//	GET    /v1/health                            -> {"status":"ok"}
//	POST   /v1/sandboxes                         CreateSandboxRequest -> 201 Sandbox (state running)
//	GET    /v1/sandboxes                         -> SandboxList
//	GET    /v1/sandboxes/{id}                    -> Sandbox
//	DELETE /v1/sandboxes/{id}                    -> Sandbox (ended, end_reason stopped; removes a paused one)
//	POST   /v1/sandboxes/{id}/stop               -> Sandbox (same as DELETE)
//	POST   /v1/sandboxes/{id}/extend             ExtendRequest -> Sandbox
//	POST   /v1/sandboxes/{id}/pause              -> Sandbox (paused)
//	POST   /v1/sandboxes/{id}/resume             -> Sandbox (running)
//	POST   /v1/sandboxes/{id}/exec               ExecRequest -> 200 ndjson ExecEvent stream, or 201 Process when background
//	GET    /v1/sandboxes/{id}/processes          ?output=false&running=true -> ProcessList
//	GET    /v1/sandboxes/{id}/processes/{pid}    ?wait=true&timeout_ms=N -> Process
//	POST   /v1/sandboxes/{id}/processes/{pid}/kill -> Process
//	POST   /v1/sandboxes/{id}/processes/{pid}/stdin ?close=true body bytes -> 204 (keep_stdin processes; at most MaxStdinBody bytes)
//	POST   /v1/sandboxes/{id}/processes/{pid}/resize PtySize -> 204 (processes started with pty)
//	GET    /v1/sandboxes/{id}/pty                ?cols=&rows=&cmd=&cmd=&user=&cwd=&env=K=V or ?pty_id= -> 101 WebSocket: binary frames the terminal's bytes, text frames PtyMessage
//	GET    /v1/sandboxes/{id}/processes/{pid}/stream ?stdout_offset=&stderr_offset= -> 200 ndjson ExecEvent stream (start, output from the offsets, exit)
//	GET    /v1/sandboxes/{id}/files              ?path=&user=root -> file bytes (application/octet-stream)
//	PUT    /v1/sandboxes/{id}/files              ?path=&mode=0644&user=root body bytes -> FileInfo (parents are made; user=root: owned by root)
//	DELETE /v1/sandboxes/{id}/files              ?path=&recursive=true -> 204
//	GET    /v1/sandboxes/{id}/files/list         ?path=&limit=N -> FileList (truncated when more than N)
//	GET    /v1/sandboxes/{id}/files/stat         ?path= -> FileInfo
//	POST   /v1/sandboxes/{id}/files/mkdir        ?path= -> FileInfo (parents are made)
//	GET    /v1/sandboxes/{id}/archive            ?path= -> application/x-tar stream of the file or directory
//	PUT    /v1/sandboxes/{id}/archive            ?path= body application/x-tar -> ArchiveResult (extracted into directory path)
//	POST   /v1/sandboxes/{id}/code               CodeRequest -> 200 ndjson CodeEvent stream
//	POST   /v1/sandboxes/{id}/contexts           CreateContextRequest -> 201 CodeContext
//	GET    /v1/sandboxes/{id}/contexts           -> CodeContextList
//	POST   /v1/sandboxes/{id}/contexts/{cid}/restart -> CodeContext (a new kernel: state lost)
//	DELETE /v1/sandboxes/{id}/contexts/{cid}     -> 204 (kills the kernel)
//	GET    /v1/sandboxes/{id}/network            -> Network
//	PUT    /v1/sandboxes/{id}/network            Network -> Sandbox (the new policy applies to new connections at once)
//	GET    /v1/sandboxes/{id}/egress             -> EgressLog
//	POST   /v1/sandboxes/{id}/snapshot           SnapshotRequest -> 201 Template (the sandbox's file system now; it keeps running)
//	POST   /v1/sandboxes/{id}/snapshots          CreateSnapshotRequest -> 201 Snapshot (memory, processes and disk; the sandbox keeps running)
//	POST   /v1/sandboxes/{id}/fork               ForkRequest -> 201 ForkResult (count sandboxes started from a snapshot of it, all or none)
//	GET    /v1/snapshots                         -> SnapshotList (the account's, newest first)
//	GET    /v1/snapshots/{sid}                   -> Snapshot
//	DELETE /v1/snapshots/{sid}                   -> 204
//	GET    /v1/templates                         -> TemplateList (the account's and the public ones)
//	POST   /v1/templates                         body application/json: a build specification; or application/x-tar: first entry withruntime-build.json (the specification), then the build context -> 202 TemplateBuild
//	GET    /v1/templates/builds/{id}             -> TemplateBuild (the account's own)
//	GET    /v1/templates/builds/{id}/logs        ?follow=false -> 200 ndjson BuildLogEvent stream (follows until the build ends unless follow=false)
//	POST   /v1/templates/import                  ?name=NAME[:TAG] body: an image (docker save tarball or OCI archive), or &ref=REGISTRY/REPO:TAG and no body -> 201 Template
//	GET    /v1/templates/{name}                  -> Template ({name} is NAME or NAME:TAG, one path segment: "/" sent as %2F)
//	DELETE /v1/templates/{name}                  -> Template (state deleting while in use; its storage goes with the last user)
//	POST   /v1/templates/{name}/publish          PublishRequest -> Template (admin key only: the admin account's template, shown to every account or not)
//	PUT    /v1/secrets/{name}                    SetSecretRequest -> SecretInfo (never the value back)
//	GET    /v1/secrets                           -> SecretList
//	DELETE /v1/secrets/{name}                    -> 204
//	POST   /v1/accounts                          CreateAccountRequest -> 201 Account (admin key only)
//	GET    /v1/accounts                          -> AccountList (admin key only)
//	POST   /v1/keys                              CreateKeyRequest -> 201 Key with its secret (full or admin key)
//	GET    /v1/keys                              ?account= (admin) -> KeyList (never secrets)
//	GET    /v1/keys/current                      -> Key (the caller's own, without its secret)
//	DELETE /v1/keys/{kid}                        -> 204 (the key stops working at once)
//	GET    /v1/usage                             ?account= (admin) &key=&from=&to= -> Usage
//	POST   /v1/webhooks                          CreateWebhookRequest -> 201 Webhook with its secret (shown once)
//	GET    /v1/webhooks                          -> WebhookList (never secrets; each with its latest deliveries)
//	DELETE /v1/webhooks/{id}                     -> 204
//	GET    /v1/audit                             ?since=RFC3339&limit=N -> AuditLog (admin key only)
//	POST   /v1/trial                             no key; only with serve --allow-trial; rate-limited per client address -> 201 Trial
//	POST   /v1/mcp                               MCP's streamable HTTP transport (stateless): the tools of "withruntime mcp", acting as the key
//
// The in-sandbox agent serves the same routes from /exec on, without the
// "/v1/sandboxes/{id}" prefix, plus GET /healthz. The server checks auth and
// the sandbox's state, then forwards those requests to the agent as they
// are: paths are resolved inside the sandbox, never on the host.
