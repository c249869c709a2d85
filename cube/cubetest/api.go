package cubetest

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
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
	mux.HandleFunc("GET /sandboxes/{id}", s.getSandbox)
	mux.HandleFunc("DELETE /sandboxes/{id}", s.deleteSandbox)
	mux.HandleFunc("POST /sandboxes/{id}/pause", s.pauseSandbox)
	mux.HandleFunc("POST /sandboxes/{id}/connect", s.connectSandbox)
	mux.HandleFunc("POST /sandboxes/{id}/snapshots", s.createSnapshot)
	mux.HandleFunc("POST /sandboxes/{id}/rollback", s.rollbackSandbox)
	mux.HandleFunc("GET /snapshots", s.listSnapshots)
	mux.HandleFunc("DELETE /templates/{id}", s.deleteTemplate)
	mux.HandleFunc("GET /health", s.health)
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

// decodeBody reads a JSON object the way CubeAPI's extractor does: a wrong
// content type is 415, a body that does not parse is 422 in plain text.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnsupportedMediaType)
		_, _ = fmt.Fprint(w, "Expected request with `Content-Type: application/json`")
		return false
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = fmt.Fprintf(w, "Failed to deserialize the JSON body into the target type: %v", err)
		return false
	}
	return true
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are names CubeAPI refuses in envVars.
var reservedEnv = map[string]bool{"PATH": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "HOME": true}

type createRequest struct {
	TemplateID          *string           `json:"templateID"`
	Timeout             *int              `json:"timeout"`
	EnvVars             map[string]string `json:"envVars"`
	Envs                map[string]string `json:"envs"`
	Metadata            map[string]string `json:"metadata"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Lifecycle           *cube.Lifecycle   `json:"lifecycle"`
	Network             *cube.Network     `json:"network"`
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.TemplateID == nil || *req.TemplateID == "" {
		writeError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	env := req.EnvVars
	if env == nil {
		env = req.Envs
	}
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
	mounts, err := cube.DecodeHostMounts(req.Metadata[cube.HostMountKey])
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
	templateID := *req.TemplateID

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
		id: id, templateID: templateID, domain: s.opts.Domain, metadata: req.Metadata, envVars: map[string]string{},
		mounts: mounts, timeout: req.Timeout, startedAt: time.Now().UTC(),
		dir: filepath.Join(s.dir, "sandboxes", id),
	}
	if req.Lifecycle != nil {
		sb.autoResume = req.Lifecycle.AutoResume
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
	l := cube.ListedSandbox{
		TemplateID: sb.templateID, SandboxID: sb.id, ClientID: "cubetest", StartedAt: sb.startedAt,
		CPUCount: 2, MemoryMB: 2048, DiskSizeMB: 10240, Metadata: sb.metadata, State: state, EnvdVersion: "0.2.0",
	}
	if sb.timeout != nil && *sb.timeout >= 0 {
		end := sb.startedAt.Add(time.Duration(*sb.timeout) * time.Second)
		l.EndAt = &end
	}
	return l
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
	// metadata=k%3Dv%26k2%3Dv2: one query value that is itself a query.
	filter, err := url.ParseQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid metadata filter: %v", err))
		return
	}
	s.mu.Lock()
	boxes := make([]*sandbox, 0, len(s.sandboxes))
	for _, id := range sortedKeys(s.sandboxes) {
		boxes = append(boxes, s.sandboxes[id])
	}
	s.mu.Unlock()
	out := []cube.ListedSandbox{}
	for _, sb := range boxes {
		match := true
		for k := range filter {
			if v, ok := sb.metadata[k]; !ok || v != filter.Get(k) {
				match = false
				break
			}
		}
		if match {
			out = append(out, sb.listed())
		}
	}
	writeJSON(w, http.StatusOK, out)
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
	var req struct {
		Timeout *int `json:"timeout"`
	}
	if !decodeBody(w, r, &req) {
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
	var req struct {
		Name string `json:"name"`
	}
	var raw json.RawMessage
	if !decodeBody(w, r, &raw) {
		return
	}
	if err := json.Unmarshal(raw, &req); err != nil || len(raw) == 0 || raw[0] != '{' {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = fmt.Fprint(w, "Failed to deserialize the JSON body into the target type: expected a JSON object")
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
		id: snapID, name: req.Name, sandboxID: sb.id, templateID: sb.templateID, createdAt: time.Now().UTC(),
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
	writeJSON(w, http.StatusOK, map[string]string{"templateID": id, "operationID": "op-delete-" + id, "status": "READY"})
}

func (s *Server) rollbackSandbox(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SnapshotID string `json:"snapshotID"`
	}
	if !decodeBody(w, r, &req) {
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

// idFromHost parses CubeProxy's Host: <port>-<sandboxID>.<domain>[:port].
func idFromHost(host, domain string) (port int, id string, ok bool) {
	if h, _, found := strings.Cut(host, ":"); found {
		host = h
	}
	label, rest, found := strings.Cut(host, ".")
	if !found || rest != domain {
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
