package cubetest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratahq/strata/cube"
)

func (s *Server) apiRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", s.createSandbox)
	mux.HandleFunc("GET /sandboxes", s.listSandboxes)
	mux.HandleFunc("GET /v2/sandboxes", s.listSandboxesV2)
	mux.HandleFunc("GET /sandboxes/{id}", s.getSandbox)
	mux.HandleFunc("DELETE /sandboxes/{id}", s.deleteSandbox)
	mux.HandleFunc("POST /sandboxes/{id}/pause", s.pauseSandbox)
	mux.HandleFunc("POST /sandboxes/{id}/connect", s.connectSandbox)
	mux.HandleFunc("POST /sandboxes/{id}/snapshots", s.createSnapshot)
	mux.HandleFunc("POST /sandboxes/{id}/rollback", s.rollbackSandbox)
	mux.HandleFunc("GET /snapshots", s.listSnapshots)
	mux.HandleFunc("DELETE /templates/{id}", s.deleteTemplate)
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /templates", s.listTemplates)
	if len(s.opts.Nodes) > 0 {
		mux.HandleFunc("GET /cubeapi/v1/nodes", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.opts.Nodes) })
		mux.HandleFunc("GET /cubeapi/v1/cluster/overview", s.clusterOverview)
	}
	mux.HandleFunc("POST /templates", s.createTemplate)
	mux.HandleFunc("GET /templates/aliases/{alias}", s.templateByAlias)
	mux.HandleFunc("GET /templates/{id}/builds/{build}/status", s.buildStatus)
	mux.HandleFunc("GET /templates/{id}/builds/{build}/logs", s.buildLogs)
	// e2b >= 2.51 creates through /v2/sandboxes, which CubeAPI lacks.
	mux.HandleFunc("POST /v2/sandboxes", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusMethodNotAllowed)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.APIKey != "" && r.URL.Path != "/health" && !s.authorized(r) {
			writeError(w, http.StatusUnauthorized, "unauthorized: missing or invalid API key")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	return r.Header.Get("X-API-Key") == s.opts.APIKey || r.Header.Get("Authorization") == "Bearer "+s.opts.APIKey
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// decodeBody reads a JSON body the way CubeAPI's axum Json extractor does
// (serde, no deny_unknown_fields): a missing or wrong content type is 415,
// a body that is not JSON is 400, JSON of the wrong shape (not an object, a
// required field missing or null, a field of the wrong type) is 422; all
// three in plain text. Unknown fields are ignored.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, required ...string) bool {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		writeText(w, http.StatusUnsupportedMediaType, "Expected request with `Content-Type: application/json`")
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		writeText(w, http.StatusBadRequest, "Failed to buffer the request body: "+err.Error())
		return false
	}
	if !json.Valid(body) {
		var probe any
		err := json.Unmarshal(body, &probe)
		writeText(w, http.StatusBadRequest, fmt.Sprintf("Failed to parse the request body as JSON: %v", err))
		return false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		writeText(w, http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: invalid type: expected a JSON object")
		return false
	}
	for _, name := range required {
		raw, ok := fields[name]
		if !ok {
			writeText(w, http.StatusUnprocessableEntity, fmt.Sprintf("Failed to deserialize the JSON body into the target type: missing field `%s`", name))
			return false
		}
		if string(raw) == "null" {
			writeText(w, http.StatusUnprocessableEntity, fmt.Sprintf("Failed to deserialize the JSON body into the target type: %s: invalid type: null", name))
			return false
		}
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeText(w, http.StatusUnprocessableEntity, fmt.Sprintf("Failed to deserialize the JSON body into the target type: %v", err))
		return false
	}
	return true
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are names CubeAPI refuses in envVars.
var reservedEnv = map[string]bool{"PATH": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "HOME": true}

// createRequest is CubeAPI's NewSandbox (models/mod.rs): typed as the
// server types it (timeout is an i32, autoResume an object), with no
// lifecycle and no network.rules (unknown fields are ignored).
type createRequest struct {
	TemplateID string `json:"templateID"`
	Timeout    *int32 `json:"timeout"`
	AutoPause  bool   `json:"autoPause"`
	AutoResume *struct {
		Enabled *bool `json:"enabled"`
	} `json:"autoResume"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	MCP                 json.RawMessage   `json:"mcp"`
	VolumeMounts        []struct {
		Name string `json:"name"`
		Path string `json:"path"`
	} `json:"volumeMounts"`
}

// networkConfig is CubeAPI's SandboxNetworkConfig.
type networkConfig struct {
	AllowPublicTraffic *bool    `json:"allowPublicTraffic"`
	AllowOut           []string `json:"allowOut"`
	DenyOut            []string `json:"denyOut"`
	MaskRequestHost    *string  `json:"maskRequestHost"`
}

// legacyHostMountKey is the older spelling CubeAPI still accepts.
const legacyHostMountKey = "hostdir-mount"

// defaultCreateTimeout is CubeAPI's default_timeout() for NewSandbox.
const defaultCreateTimeout = 15

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !decodeBody(w, r, &req, "templateID") {
		return
	}
	if req.AutoResume != nil && req.AutoResume.Enabled == nil {
		writeText(w, http.StatusUnprocessableEntity, "Failed to deserialize the JSON body into the target type: autoResume: missing field `enabled`")
		return
	}
	if req.TemplateID == "" {
		writeError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	env := req.EnvVars
	for k, v := range env {
		if !envNameRE.MatchString(k) || reservedEnv[k] {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid env var name %q", k))
			return
		}
		if len(v) > 4096 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("env var %q is longer than 4 KiB", k))
			return
		}
	}
	// CubeAPI moves host-mount (or the legacy hostdir-mount) out of the
	// labels into a CubeMaster annotation: it is never listed back.
	mountSpec, labels := "", map[string]string{}
	for k, v := range req.Metadata {
		labels[k] = v
	}
	if v, ok := labels[cube.HostMountKey]; ok {
		mountSpec = v
	} else if v, ok := labels[legacyHostMountKey]; ok {
		mountSpec = v
	}
	delete(labels, cube.HostMountKey)
	delete(labels, legacyHostMountKey)
	mounts, err := cube.DecodeHostMounts(mountSpec)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for _, m := range mounts {
		if !filepath.IsAbs(m.HostPath) || !filepath.IsAbs(m.MountPath) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("host mount %s -> %s: paths must be absolute", m.HostPath, m.MountPath))
			return
		}
		if _, err := os.Stat(m.HostPath); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("host mount: %v", err))
			return
		}
	}
	templateID := req.TemplateID
	timeout := int(defaultCreateTimeout)
	if req.Timeout != nil {
		timeout = int(*req.Timeout)
	}
	network := req.Network
	internet := req.AllowInternetAccess
	if network != nil && network.AllowPublicTraffic != nil {
		internet = network.AllowPublicTraffic
	}

	s.mu.Lock()
	snap := s.snapshots[templateID]
	if snap == nil && !s.templates[templateID] {
		s.mu.Unlock()
		writeError(w, http.StatusInternalServerError,
			fmt.Sprintf("create sandbox failed: cubemaster ret_code 130404: template %q not found", templateID))
		return
	}
	s.seq++
	id := fmt.Sprintf("sb%08d", s.seq)
	s.mu.Unlock()

	sb := &sandbox{
		id: id, templateID: templateID, domain: s.opts.Domain, metadata: labels, envVars: map[string]string{},
		mounts: mounts, timeout: &timeout, startedAt: time.Now().UTC(),
		dir: filepath.Join(s.dir, "sandboxes", id), autoPause: req.AutoPause, internet: internet,
	}
	if network != nil {
		sb.allowOut, sb.denyOut = network.AllowOut, network.DenyOut
	}
	if req.AutoResume != nil {
		sb.autoResume = *req.AutoResume.Enabled
	}
	if s.opts.AccessTokens {
		sb.envdToken, sb.trafficToken = "envd-"+id, "traffic-"+id
	}
	from := ""
	if snap != nil {
		from = filepath.Join(snap.dir, "rootfs")
		for k, v := range snap.envVars {
			sb.envVars[k] = v
		}
		if len(mounts) == 0 {
			sb.mounts = snap.mounts
		}
	}
	for k, v := range env {
		sb.envVars[k] = v
	}
	if err := sb.boot(from); err != nil {
		sb.destroy()
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("create sandbox failed: cubemaster ret_code 130545: %v", err))
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sb.destroy()
		writeError(w, http.StatusServiceUnavailable, errClosed.Error())
		return
	}
	s.sandboxes[id] = sb
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, sb.info())
}

func (sb *sandbox) info() cube.Sandbox {
	return cube.Sandbox{
		TemplateID: sb.templateID, SandboxID: sb.id, ClientID: "cubetest", EnvdVersion: "0.2.0", Domain: sb.domain,
		EnvdAccessToken: sb.envdToken, TrafficAccessToken: sb.trafficToken,
	}
}

func (sb *sandbox) listed() cube.ListedSandbox {
	sb.mu.Lock()
	state := sb.state
	sb.mu.Unlock()
	if state == cube.StatePausing {
		state = cube.StateRunning // CubeAPI's SandboxState is running | paused
	}
	end := sb.startedAt
	if sb.timeout != nil && *sb.timeout > 0 {
		end = end.Add(time.Duration(*sb.timeout) * time.Second)
	}
	return cube.ListedSandbox{
		TemplateID: sb.templateID, SandboxID: sb.id, ClientID: "cubetest", StartedAt: sb.startedAt, EndAt: &end,
		CPUCount: 2, MemoryMB: 2048, DiskSizeMB: 10240, Metadata: sb.metadata, State: state, EnvdVersion: "0.2.0",
	}
}

// lookup returns a live sandbox or writes 404.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *sandbox {
	id := r.PathValue("id")
	s.mu.Lock()
	sb := s.sandboxes[id]
	s.mu.Unlock()
	if sb == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", id))
	}
	return sb
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	s.writeList(w, r, "", 200)
}

// listSandboxesV2 is GET /v2/sandboxes?state=&metadata=&limit=: one page,
// no next token (CubeAPI reads nextToken and ignores it).
func (s *Server) listSandboxesV2(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			writeText(w, http.StatusBadRequest, "Failed to deserialize query string: limit: invalid digit found in string")
			return
		}
		limit = max(int(n), 1)
	}
	s.writeList(w, r, q.Get("state"), limit)
}

// writeList filters as CubeAPI's filter_by_metadata: the metadata value,
// decoded once with the query, split on & and each pair on its first =;
// a pair without = is ignored. An unknown state filters nothing.
func (s *Server) writeList(w http.ResponseWriter, r *http.Request, state string, limit int) {
	filter, hasFilter := r.URL.Query()["metadata"]
	s.mu.Lock()
	boxes := make([]*sandbox, 0, len(s.sandboxes))
	for _, id := range sortedKeys(s.sandboxes) {
		boxes = append(boxes, s.sandboxes[id])
	}
	s.mu.Unlock()
	out := []cube.ListedSandbox{}
	for _, sb := range boxes {
		if len(out) >= limit {
			break
		}
		l := sb.listed()
		if hasFilter && !metadataMatches(l.Metadata, filter[0]) {
			continue
		}
		if (state == cube.StateRunning || state == cube.StatePaused) && l.State != state {
			continue
		}
		out = append(out, l)
	}
	writeJSON(w, http.StatusOK, out)
}

func metadataMatches(md map[string]string, query string) bool {
	if md == nil {
		return false
	}
	for _, pair := range strings.Split(query, "&") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			continue
		}
		if got, present := md[k]; !present || got != v {
			return false
		}
	}
	return true
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	l := sb.listed()
	l.Domain = sb.domain
	writeJSON(w, http.StatusOK, l)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	sb.mu.Lock()
	pausing := sb.state == cube.StatePausing
	sb.mu.Unlock()
	if pausing {
		w.Header().Set("Retry-After", strconv.Itoa(s.opts.RetryAfterSeconds))
		writeError(w, http.StatusServiceUnavailable, "sandbox is pausing, retry later")
		return
	}
	s.mu.Lock()
	if s.sandboxes[sb.id] != sb {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", sb.id))
		return
	}
	delete(s.sandboxes, sb.id)
	s.killed[sb.id] = true
	s.mu.Unlock()
	sb.destroy()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.state != cube.StateRunning {
		writeError(w, http.StatusConflict, fmt.Sprintf("sandbox %q is %s", sb.id, sb.state))
		return
	}
	sb.signalLocked(syscall.SIGSTOP)
	if s.opts.PauseDelay > 0 {
		sb.state = cube.StatePausing
		time.AfterFunc(s.opts.PauseDelay, func() {
			sb.mu.Lock()
			if sb.state == cube.StatePausing {
				sb.state = cube.StatePaused
			}
			sb.mu.Unlock()
		})
	} else {
		sb.state = cube.StatePaused
	}
	w.WriteHeader(http.StatusNoContent)
}

// resume continues a paused sandbox; false while it is still pausing.
func (sb *sandbox) resume() bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch sb.state {
	case cube.StatePausing:
		return false
	case cube.StatePaused:
		sb.state = cube.StateRunning
		sb.signalLocked(syscall.SIGCONT)
	}
	return true
}

func (s *Server) connectSandbox(w http.ResponseWriter, r *http.Request) {
	// ConnectSandbox: timeout is a required i32 (no serde default).
	var req struct {
		Timeout int32 `json:"timeout"`
	}
	if !decodeBody(w, r, &req, "timeout") {
		return
	}
	// Newer CubeAPI refuses a timeout of 0 or less before asking CubeMaster
	// (routes.rs test resume_and_connect_reject_invalid_timeout_before_cubemaster).
	if req.Timeout <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid timeout %d: must be a positive number of seconds", req.Timeout))
		return
	}
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	if !sb.resume() {
		w.Header().Set("Retry-After", strconv.Itoa(s.opts.RetryAfterSeconds))
		writeError(w, http.StatusServiceUnavailable, "sandbox is pausing, retry later")
		return
	}
	writeJSON(w, http.StatusOK, sb.info())
}

func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	// CreateSnapshotRequest: an object with an optional string name.
	var req struct {
		Name *string `json:"name"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if s.opts.LegacySnapshots {
		// An older CubeAPI whose CubeMaster lacks the endpoint answered a
		// fresh request id as if a snapshot had been taken.
		if s.lookup(w, r) == nil {
			return
		}
		name := "legacy"
		if req.Name != nil {
			name = *req.Name
		}
		writeJSON(w, http.StatusCreated, map[string]any{"snapshotID": fmt.Sprintf("%08x-0000-4000-8000-000000000000", time.Now().UnixNano()&0xffffffff), "names": []string{name}})
		return
	}
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	sb.mu.Lock()
	if sb.snapshotting {
		sb.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("a snapshot of sandbox %q is in progress", sb.id))
		return
	}
	sb.snapshotting = true
	sb.mu.Unlock()
	defer func() {
		sb.mu.Lock()
		sb.snapshotting = false
		sb.mu.Unlock()
	}()

	s.mu.Lock()
	s.snapSeq++
	snapID := fmt.Sprintf("snap-%08x", s.snapSeq)
	s.mu.Unlock()
	snap := &snapshot{
		id: snapID, name: deref(req.Name), sandboxID: sb.id, templateID: sb.templateID, createdAt: time.Now().UTC(),
		dir: filepath.Join(s.dir, "snapshots", snapID), mounts: sb.mounts, envVars: sb.envVars,
	}
	if err := sb.takeSnapshot(snap.dir); err != nil {
		_ = os.RemoveAll(snap.dir)
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("snapshot failed: %v", err))
		return
	}
	s.mu.Lock()
	s.snapshots[snapID] = snap
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, snap.info())
}

func (snap *snapshot) info() cube.SnapshotInfo {
	names := []string{}
	if snap.name != "" {
		names = append(names, snap.name)
	}
	return cube.SnapshotInfo{SnapshotID: snap.id, Names: names, SandboxID: snap.sandboxID, CreatedAt: snap.createdAt}
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := s.opts.SnapshotPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, "limit must be between 1 and 100")
			return
		}
		limit = min(limit, n)
	}
	sandboxID, token := q.Get("sandboxID"), q.Get("nextToken")
	s.mu.Lock()
	var all []cube.SnapshotInfo
	for _, id := range sortedKeys(s.snapshots) {
		snap := s.snapshots[id]
		if sandboxID != "" && snap.sandboxID != sandboxID {
			continue
		}
		if token != "" && id <= token {
			continue
		}
		all = append(all, snap.info())
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].SnapshotID < all[j].SnapshotID })
	page := all
	if len(all) > limit {
		page = all[:limit]
		w.Header().Set("x-next-token", page[len(page)-1].SnapshotID)
	}
	if page == nil {
		page = []cube.SnapshotInfo{}
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	snap := s.snapshots[id]
	delete(s.snapshots, id)
	template := s.templates[id]
	delete(s.templates, id)
	s.mu.Unlock()
	if snap == nil && !template {
		writeError(w, http.StatusNotFound, fmt.Sprintf("template %q not found", id))
		return
	}
	if snap != nil {
		_ = os.RemoveAll(snap.dir)
	}
	// handlers/templates.rs: 204 with no body for a snapshot or a
	// template; a snapshot's CubeMaster job id is in x-operation-id.
	if snap != nil {
		w.Header().Set("x-operation-id", "op-delete-"+id)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) rollbackSandbox(w http.ResponseWriter, r *http.Request) {
	// RollbackRequest: snapshotID is a required string.
	var req struct {
		SnapshotID string `json:"snapshotID"`
	}
	if !decodeBody(w, r, &req, "snapshotID") {
		return
	}
	if req.SnapshotID == "" {
		writeError(w, http.StatusBadRequest, "snapshotID is required")
		return
	}
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	snap := s.snapshots[req.SnapshotID]
	s.mu.Unlock()
	if snap == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("snapshot %q not found", req.SnapshotID))
		return
	}
	if snap.sandboxID != sb.id {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("snapshot %q belongs to sandbox %q", snap.id, snap.sandboxID))
		return
	}
	sb.mu.Lock()
	if sb.snapshotting {
		sb.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("a snapshot of sandbox %q is in progress", sb.id))
		return
	}
	sb.snapshotting = true
	sb.mu.Unlock()
	err := sb.rollback(snap)
	sb.mu.Lock()
	sb.snapshotting = false
	sb.mu.Unlock()
	if err != nil {
		// As in CubeSandbox, a failed restore loses the sandbox.
		s.mu.Lock()
		delete(s.sandboxes, sb.id)
		s.killed[sb.id] = true
		s.mu.Unlock()
		sb.destroy()
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("rollback failed: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"sandboxID": sb.id, "snapshotID": snap.id, "operationID": "op-rollback-" + sb.id, "status": "READY",
	})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	n := len(s.sandboxes)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "sandboxes": n})
}

// idFromHost parses CubeProxy's Host: <port>-<sandboxID>.<anything>[:port].
// Like CubeProxy it reads only the first label: the domain is not checked.
func idFromHost(host, _ string) (port int, id string, ok bool) {
	if h, _, found := strings.Cut(host, ":"); found {
		host = h
	}
	label, _, found := strings.Cut(host, ".")
	if !found {
		return 0, "", false
	}
	portText, id, found := strings.Cut(label, "-")
	if !found || id == "" {
		return 0, "", false
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port <= 0 || port > 65535 {
		return 0, "", false
	}
	return port, id, true
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// listTemplates is GET /templates: TemplateSummary rows.
func (s *Server) listTemplates(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	ids := sortedKeys(s.templates)
	s.mu.Unlock()
	out := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		out = append(out, map[string]any{"templateID": id, "instanceType": "cubebox", "status": "READY"})
	}
	writeJSON(w, http.StatusOK, out)
}

// buildJob is a template build from an image, advanced one phase per poll.
type buildJob struct {
	id, templateID, image string
	polls                 int
}

var buildPhases = []string{"PULLING", "BUILDING", "DISTRIBUTING"}

// createTemplate is POST /templates (CreateTemplateRequest): templateID
// and image required, other fields forwarded to CubeMaster; 202 with a job.
func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		TemplateID   string  `json:"templateID"`
		InstanceType *string `json:"instanceType"`
		Image        string  `json:"image"`
	}
	if !decodeBody(w, r, &req, "templateID", "image") {
		return
	}
	if req.TemplateID == "" || req.Image == "" {
		writeError(w, http.StatusBadRequest, "templateID and image must not be empty")
		return
	}
	s.mu.Lock()
	if s.builds == nil {
		s.builds = map[string]*buildJob{}
	}
	s.seq++
	job := &buildJob{id: fmt.Sprintf("job-%08d", s.seq), templateID: req.TemplateID, image: req.Image}
	s.builds[job.id] = job
	s.mu.Unlock()
	writeJSON(w, http.StatusAccepted, map[string]any{
		"jobID": job.id, "templateID": job.templateID, "status": "PENDING", "phase": buildPhases[0], "progress": 0,
	})
}

func (s *Server) buildStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	job := s.builds[r.PathValue("build")]
	if job == nil || job.templateID != r.PathValue("id") {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, fmt.Sprintf("build %q of template %q not found", r.PathValue("build"), r.PathValue("id")))
		return
	}
	steps := s.opts.BuildSteps
	if steps <= 0 {
		steps = 3
	}
	job.polls++
	status, msg, progress := "BUILDING", buildPhases[min(job.polls-1, len(buildPhases)-1)], min(100*job.polls/steps, 99)
	switch {
	case job.image == "fail" && job.polls >= steps:
		status, msg = "FAILED", "pull image fail: not found"
	case job.polls >= steps:
		status, msg, progress = "READY", "READY", 100
		s.templates[job.templateID] = true
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"buildID": job.id, "templateID": job.templateID, "status": status, "progress": progress, "message": msg,
	})
}

func (s *Server) buildLogs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	job := s.builds[r.PathValue("build")]
	s.mu.Unlock()
	if job == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("build %q not found", r.PathValue("build")))
		return
	}
	writeText(w, http.StatusOK, fmt.Sprintf("pulling %s\n", job.image))
}

func (s *Server) templateByAlias(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	id, ok := s.aliases[r.PathValue("alias")]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("template alias %q not found", r.PathValue("alias")))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"templateID": id, "aliases": []string{r.PathValue("alias")}, "status": "READY"})
}

func (s *Server) clusterOverview(w http.ResponseWriter, _ *http.Request) {
	var o cube.ClusterOverview
	for _, n := range s.opts.Nodes {
		o.NodeCount++
		if n.Healthy {
			o.HealthyNodes++
		}
		o.TotalCPUCores += n.Capacity.CPUCores
		o.AllocatableCPUCores += n.Allocatable.CPUCores
		o.TotalMemoryMB += n.Capacity.MemoryMB
		o.AllocatableMemoryMB += n.Allocatable.MemoryMB
		o.MaxMvmSlots += n.MaxMvmSlots
	}
	writeJSON(w, http.StatusOK, o)
}
