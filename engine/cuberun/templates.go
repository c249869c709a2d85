package cuberun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/engine/world"
)

// ErrCubeTemplateUnknown means the template a World names is neither a
// template nor an alias on the CubeSandbox strata talks to.
var ErrCubeTemplateUnknown = errors.New("unknown cube template")

// Defaults of a template strata builds for a size the request leaves open.
const (
	cubeBuildDefaultCPU    = 1000 // millicores
	cubeBuildDefaultMemory = 1024 // MB
	cubeBuildTimeout       = 30 * time.Minute
)

// CubeBuildPoll is how often a template build's status is asked.
var CubeBuildPoll = 2 * time.Second

// BuiltCubeTemplate is a template strata built from cube.base_image for a
// size no configured template fits, recorded in the state root
// (cube/templates.json) so later Worlds of that size reuse it.
type BuiltCubeTemplate struct {
	ID       string    `json:"id"`
	CPU      int       `json:"cpu"`
	MemoryMB int       `json:"memory_mb"`
	DiskMB   int       `json:"disk_mb"`
	Image    string    `json:"image"`
	Job      string    `json:"job"`
	Endpoint string    `json:"endpoint"`
	BuiltAt  time.Time `json:"built_at"`
}

func (e *Runtime) cubeTemplatesFile() string {
	return filepath.Join(e.Paths.Root, "cube", "templates.json")
}

// builtCubeTemplates reads the record; a missing or unreadable one is empty
// (an unreadable one is logged: strata then builds again, never guesses).
// Only templates built on the configured endpoint count.
func (e *Runtime) builtCubeTemplates() []BuiltCubeTemplate {
	data, err := os.ReadFile(e.cubeTemplatesFile())
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			e.Log.Warn("read built cube templates", "err", err)
		}
		return nil
	}
	var all []BuiltCubeTemplate
	if err := json.Unmarshal(data, &all); err != nil {
		e.Log.Warn("read built cube templates", "file", e.cubeTemplatesFile(), "err", err)
		return nil
	}
	return slices.DeleteFunc(all, func(t BuiltCubeTemplate) bool { return t.Endpoint != e.cfg().Cube.Endpoint })
}

func (e *Runtime) recordBuiltCubeTemplate(t BuiltCubeTemplate) error {
	var all []BuiltCubeTemplate
	if data, err := os.ReadFile(e.cubeTemplatesFile()); err == nil {
		_ = json.Unmarshal(data, &all)
	}
	all = slices.DeleteFunc(all, func(o BuiltCubeTemplate) bool { return o.ID == t.ID && o.Endpoint == t.Endpoint })
	all = append(all, t)
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(e.cubeTemplatesFile()), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", e.cubeTemplatesFile(), os.Getpid())
	err = os.WriteFile(tmp, append(data, '\n'), 0o644)
	if err == nil {
		err = os.Rename(tmp, e.cubeTemplatesFile())
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record built cube template %s: %w", t.ID, err)
	}
	return nil
}

// resolveCubeTemplate picks a new World's template (ResolveCubeTemplate
// over the configured templates and those strata built), then, when Cube
// is configured and answers, checks it against GET /templates (an alias is
// resolved to its id). When no template fits the size asked for and
// cube.base_image is set, it builds one (buildCubeTemplate). Cube not
// answering leaves the choice unchecked: the World is planned and its
// create will say.
func (e *Runtime) resolveCubeTemplate(ctx context.Context, explicit string, want CubeResources, check bool, progress func(string)) (string, error) {
	cc := e.cfg().Cube
	cc.Templates = slices.Clip(cc.Templates)
	for _, b := range e.builtCubeTemplates() {
		cc.Templates = append(cc.Templates, CubeTemplate{ID: b.ID, CPU: b.CPU, MemoryMB: b.MemoryMB, DiskMB: b.DiskMB})
	}
	tpl, err := ResolveCubeTemplate(cc, explicit, want)
	if errors.Is(err, ErrNoTemplateFits) {
		if cc.BaseImage == "" || !e.cubeConfigured() {
			return "", fmt.Errorf("%w (or set cube.base_image in config.toml to have strata build one through the templates API)", err)
		}
		c, cerr := e.cubeClient()
		if cerr != nil {
			return "", fmt.Errorf("%w; cannot build one: %w", err, cerr)
		}
		b, berr := e.buildCubeTemplate(ctx, c, want, progress)
		if berr != nil {
			return "", fmt.Errorf("%w, and building one from %s failed: %w", err, cc.BaseImage, berr)
		}
		return b.ID, nil
	}
	if err != nil || !check || !e.cubeConfigured() {
		return tpl, err
	}
	c, err := e.cubeClient()
	if err != nil {
		return tpl, nil // the create says what is wrong with the config
	}
	id, err := e.checkCubeTemplate(ctx, c, tpl)
	if err != nil && cubeUnreachable(err) {
		e.Log.Warn("cube unreachable: template not checked", "template", tpl, "err", err)
		return tpl, nil
	}
	return id, err
}

// checkCubeTemplate finds id among the deployment's templates (GET
// /templates), else as an alias (GET /templates/aliases/{id}), and returns
// the template id to create from. An unknown one is an error listing what
// exists; one that is not READY says its status and last error.
func (e *Runtime) checkCubeTemplate(ctx context.Context, c *cube.Client, id string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, cubeCallTimeout)
	defer cancel()
	tpls, err := c.Templates(cctx)
	if err != nil {
		return id, fmt.Errorf("check cube template %s: %w", id, err)
	}
	find := func(id string) (cube.Template, bool) {
		i := slices.IndexFunc(tpls, func(t cube.Template) bool { return t.TemplateID == id })
		if i < 0 {
			return cube.Template{}, false
		}
		return tpls[i], true
	}
	t, ok := find(id)
	if !ok {
		real, aerr := c.TemplateByAlias(cctx, id)
		switch {
		case aerr == nil:
			if t, ok = find(real); !ok {
				t = cube.Template{TemplateID: real, Status: cube.TemplateReady}
			}
		case errors.Is(aerr, cube.ErrNotFound):
			have := make([]string, 0, len(tpls))
			for _, t := range tpls {
				have = append(have, t.TemplateID)
			}
			list := strings.Join(have, ", ")
			if list == "" {
				list = "none"
			}
			return id, fmt.Errorf("%w %q: CubeSandbox %s has no such template or alias; its templates: %s (pass --template ID, or set cube.template in %s)",
				ErrCubeTemplateUnknown, id, e.cfg().Cube.Endpoint, list, e.cfg().Path)
		default:
			return id, fmt.Errorf("check cube template %s: %w", id, aerr)
		}
	}
	if t.Status != "" && !strings.EqualFold(t.Status, cube.TemplateReady) {
		msg := fmt.Sprintf("cube template %s is %s, not READY", t.TemplateID, t.Status)
		if t.LastError != "" {
			msg += ": " + t.LastError
		}
		return id, errors.New(msg + " (wait for its build, or pick another with --template)")
	}
	return t.TemplateID, nil
}

// buildCubeTemplate builds a template of the size asked for from
// cube.base_image through the templates API (POST /templates, then its
// status polled with a progress line per change, bounded by
// cube.build_timeout), records it and returns it. One build per size at a
// time: a second strata waits for the first and reuses its template.
func (e *Runtime) buildCubeTemplate(ctx context.Context, c *cube.Client, want CubeResources, progress func(string)) (BuiltCubeTemplate, error) {
	say := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		e.Log.Info(line)
		if progress != nil {
			progress(line)
		}
	}
	image := e.cfg().Cube.BaseImage
	b := BuiltCubeTemplate{
		CPU: max(want.CPU, cubeBuildDefaultCPU), MemoryMB: max(want.MemoryMB, cubeBuildDefaultMemory), DiskMB: want.DiskMB,
		Image: image, Endpoint: e.cfg().Cube.Endpoint,
	}
	sum := sha256.Sum256([]byte(image))
	b.ID = fmt.Sprintf("strata-%dm-%dmb-%dmb-%s", b.CPU, b.MemoryMB, b.DiskMB, hex.EncodeToString(sum[:4]))
	timeout := cubeBuildTimeout
	if s := e.cfg().Cube.BuildTimeout; s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lock, err := world.LockFile(bctx, filepath.Join(e.Paths.Root, "cube", "."+b.ID+".lock"))
	if err != nil {
		return b, err
	}
	defer lock.Unlock()
	if slices.ContainsFunc(e.builtCubeTemplates(), func(o BuiltCubeTemplate) bool { return o.ID == b.ID }) {
		return b, nil // built by another strata meanwhile
	}
	// Built before but not recorded (a crash between READY and the record):
	// reuse it.
	if id, err := e.checkCubeTemplate(bctx, c, b.ID); err == nil && id == b.ID {
		say("cube template %s already exists; reusing it", b.ID)
		b.BuiltAt = time.Now().UTC()
		return b, e.recordBuiltCubeTemplate(b)
	}
	extra := map[string]any{"cpu": b.CPU, "memory": b.MemoryMB}
	if b.DiskMB > 0 {
		extra["writableLayerSize"] = fmt.Sprintf("%dMi", b.DiskMB)
	}
	say("no cube template fits cpu %dm, memory %d MB, disk %d MB: building %s from %s (up to %s)", want.CPU, want.MemoryMB, want.DiskMB, b.ID, image, timeout)
	job, err := c.StartTemplateBuild(bctx, cube.TemplateBuild{TemplateID: b.ID, Image: image, Extra: extra})
	if err != nil {
		return b, err
	}
	b.Job = job.JobID
	last := ""
	st, err := c.WaitTemplateBuild(bctx, b.ID, job.JobID, CubeBuildPoll, func(st cube.BuildStatus) {
		line := fmt.Sprintf("  %s %d%%", st.Status, st.Progress)
		if st.Message != "" && st.Message != st.Status {
			line += ": " + st.Message
		}
		if line != last {
			last = line
			say("%s", line)
		}
	})
	if err != nil {
		lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), cubeCallTimeout)
		defer lcancel()
		if logs, lerr := c.TemplateBuildLogs(lctx, b.ID, job.JobID); lerr == nil && strings.TrimSpace(logs) != "" {
			say("build log of %s (job %s):", b.ID, job.JobID)
			lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
			for _, l := range lines[max(0, len(lines)-20):] {
				say("  | %s", l)
			}
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (cube.build_timeout is %s; raise it in config.toml, the build may still finish on the server)", err, timeout)
		}
		return b, err
	}
	say("built cube template %s (job %s, %s)", b.ID, st.BuildID, st.Status)
	b.BuiltAt = time.Now().UTC()
	return b, e.recordBuiltCubeTemplate(b)
}

// CubeNoClusterAPI is what strata says where the deployment does not serve
// node capacity.
const CubeNoClusterAPI = "this CubeSandbox does not expose node capacity"

// CubeCluster is the capacity and saturation of a deployment's nodes, where
// its API offers them (cube.Client.Nodes, Cluster); Note says why not.
type CubeCluster struct {
	Overview *cube.ClusterOverview `json:"overview,omitempty"`
	Nodes    []cube.Node           `json:"nodes,omitempty"`
	Note     string                `json:"note,omitempty"`
}

func (e *Runtime) cubeCluster(ctx context.Context, c *cube.Client) CubeCluster {
	var out CubeCluster
	nodes, err := c.Nodes(ctx)
	if errors.Is(err, cube.ErrNoClusterAPI) {
		out.Note = CubeNoClusterAPI
		return out
	}
	if err != nil {
		out.Note = "node capacity unavailable: " + err.Error()
		return out
	}
	out.Nodes = nodes
	if o, err := c.Cluster(ctx); err == nil {
		out.Overview = &o
	}
	return out
}

// CubeCluster reports the configured deployment's node capacity for `top`
// and the TUI; ErrCubeNotConfigured without a [cube] endpoint.
func (e *Runtime) CubeCluster(ctx context.Context) (CubeCluster, error) {
	if !e.cubeConfigured() {
		return CubeCluster{}, ErrCubeNotConfigured
	}
	c, err := e.cubeClient()
	if err != nil {
		return CubeCluster{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, cubeCallTimeout)
	defer cancel()
	return e.cubeCluster(cctx, c), nil
}
