package cube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Template is one row of GET /templates (CubeAPI's TemplateSummary).
type Template struct {
	TemplateID   string `json:"templateID"`
	InstanceType string `json:"instanceType,omitempty"`
	Version      string `json:"version,omitempty"`
	Status       string `json:"status"` // READY when usable
	LastError    string `json:"lastError,omitempty"`
	CreatedAt    string `json:"createdAt,omitempty"`
	ImageInfo    string `json:"imageInfo,omitempty"`
}

// TemplateReady is the status of a usable template or a finished build.
const TemplateReady = "READY"

// TemplateFailed is the status of a failed build.
const TemplateFailed = "FAILED"

// Templates lists the deployment's templates (GET /templates).
func (c *Client) Templates(ctx context.Context) ([]Template, error) {
	rep, err := c.do(ctx, call{
		op: "list templates", method: http.MethodGet, url: c.apiURL("/templates", nil),
		class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	var out []Template
	if err := decodeJSON(rep, &out); err != nil {
		return nil, fmt.Errorf("cube: list templates: %w", err)
	}
	return out, nil
}

// TemplateByAlias resolves an alias (GET /templates/aliases/{alias}) to its
// template id; ErrNotFound when no template carries it.
func (c *Client) TemplateByAlias(ctx context.Context, alias string) (string, error) {
	op := "resolve template alias " + alias
	rep, err := c.do(ctx, call{
		op: op, method: http.MethodGet, url: c.apiURL("/templates/aliases/"+url.PathEscape(alias), nil),
		class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return "", err
	}
	var out struct {
		TemplateID string `json:"templateID"`
	}
	if err := decodeJSON(rep, &out); err != nil {
		return "", fmt.Errorf("cube: %s: %w", op, err)
	}
	if out.TemplateID == "" {
		return "", fmt.Errorf("cube: %s: reply has no templateID", op)
	}
	return out.TemplateID, nil
}

// TemplateBuild asks CubeAPI to build a template from a container image
// (POST /templates, CubeAPI's CreateTemplateRequest). Extra holds the
// CubeMaster fields forwarded verbatim (e.g. cpu, memory,
// writableLayerSize); it may not repeat templateID, instanceType or image.
type TemplateBuild struct {
	TemplateID   string
	InstanceType string
	Image        string
	Extra        map[string]any
}

// BuildJob is CubeAPI's TemplateBuildJob.
type BuildJob struct {
	JobID        string `json:"jobID"`
	TemplateID   string `json:"templateID"`
	Status       string `json:"status"`
	Phase        string `json:"phase"` // PULLING, BUILDING, DISTRIBUTING, READY or FAILED
	Progress     int    `json:"progress"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// BuildStatus is CubeAPI's TemplateBuildStatus.
type BuildStatus struct {
	BuildID    string `json:"buildID"`
	TemplateID string `json:"templateID"`
	Status     string `json:"status"`
	Progress   int    `json:"progress"`
	Message    string `json:"message"`
}

// StartTemplateBuild starts an asynchronous build. It is not retried once
// sent: a second request could start a second build.
func (c *Client) StartTemplateBuild(ctx context.Context, b TemplateBuild) (BuildJob, error) {
	if b.TemplateID == "" || b.Image == "" {
		return BuildJob{}, fmt.Errorf("cube: template build: templateID and image are required")
	}
	body := map[string]any{}
	for k, v := range b.Extra {
		switch k {
		case "templateID", "instanceType", "image":
			return BuildJob{}, fmt.Errorf("cube: template build: extra field %q repeats a named one", k)
		}
		body[k] = v
	}
	body["templateID"], body["image"] = b.TemplateID, b.Image
	if b.InstanceType != "" {
		body["instanceType"] = b.InstanceType
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return BuildJob{}, fmt.Errorf("cube: template build: %w", err)
	}
	op := "build template " + b.TemplateID + " from " + b.Image
	rep, err := c.do(ctx, call{
		op: op, method: http.MethodPost, url: c.apiURL("/templates", nil), body: payload, contentType: "application/json",
		class: retryUnsent, ok: []int{http.StatusAccepted, http.StatusCreated, http.StatusOK},
	})
	if err != nil {
		return BuildJob{}, err
	}
	var job BuildJob
	if err := decodeJSON(rep, &job); err != nil {
		return BuildJob{}, fmt.Errorf("cube: %s: %w", op, err)
	}
	if job.JobID == "" {
		return BuildJob{}, fmt.Errorf("cube: %s: reply has no jobID", op)
	}
	if job.TemplateID == "" {
		job.TemplateID = b.TemplateID
	}
	return job, nil
}

// TemplateBuildStatus is GET /templates/{id}/builds/{buildID}/status.
func (c *Client) TemplateBuildStatus(ctx context.Context, templateID, buildID string) (BuildStatus, error) {
	op := "status of build " + buildID + " of template " + templateID
	rep, err := c.do(ctx, call{
		op: op, method: http.MethodGet,
		url:   c.apiURL("/templates/"+url.PathEscape(templateID)+"/builds/"+url.PathEscape(buildID)+"/status", nil),
		class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return BuildStatus{}, err
	}
	var st BuildStatus
	if err := decodeJSON(rep, &st); err != nil {
		return BuildStatus{}, fmt.Errorf("cube: %s: %w", op, err)
	}
	return st, nil
}

// TemplateBuildLogs is GET /templates/{id}/builds/{buildID}/logs, as text.
func (c *Client) TemplateBuildLogs(ctx context.Context, templateID, buildID string) (string, error) {
	rep, err := c.do(ctx, call{
		op: "logs of build " + buildID, method: http.MethodGet,
		url:   c.apiURL("/templates/"+url.PathEscape(templateID)+"/builds/"+url.PathEscape(buildID)+"/logs", nil),
		class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return "", err
	}
	return string(rep.body), nil
}

// WaitTemplateBuild polls a build every interval (default 2 s) until it is
// READY or FAILED, calling progress (when set) with each status. A failed
// build's error carries its last message; the context bounds the wait
// (builds pull images: give it minutes).
func (c *Client) WaitTemplateBuild(ctx context.Context, templateID, buildID string, interval time.Duration, progress func(BuildStatus)) (BuildStatus, error) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	for {
		st, err := c.TemplateBuildStatus(ctx, templateID, buildID)
		if err != nil {
			return st, err
		}
		if progress != nil {
			progress(st)
		}
		switch strings.ToUpper(st.Status) {
		case TemplateReady:
			return st, nil
		case TemplateFailed:
			return st, fmt.Errorf("cube: build %s of template %s failed: %s (see TemplateBuildLogs)", buildID, templateID, st.Message)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, fmt.Errorf("cube: wait for build %s of template %s (at %d%%): %w", buildID, templateID, st.Progress, ctx.Err())
		case <-t.C:
		}
	}
}
