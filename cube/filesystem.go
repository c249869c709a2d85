package cube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Entry types in Entry.Type (envd's FileType enum).
const (
	EntryFile      = "FILE_TYPE_FILE"
	EntryDirectory = "FILE_TYPE_DIRECTORY"
	EntrySymlink   = "FILE_TYPE_SYMLINK"
)

// Entry is envd's filesystem EntryInfo.
type Entry struct {
	Name          string
	Type          string
	Path          string
	Size          int64
	Mode          uint32
	Permissions   string
	Owner         string
	Group         string
	ModifiedTime  time.Time
	SymlinkTarget string
}

// UnmarshalJSON reads protobuf JSON: size (an int64) arrives as a string.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var w struct {
		Name          string          `json:"name"`
		Type          string          `json:"type"`
		Path          string          `json:"path"`
		Size          json.RawMessage `json:"size"`
		Mode          uint32          `json:"mode"`
		Permissions   string          `json:"permissions"`
		Owner         string          `json:"owner"`
		Group         string          `json:"group"`
		ModifiedTime  time.Time       `json:"modifiedTime"`
		SymlinkTarget string          `json:"symlinkTarget"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Entry{
		Name: w.Name, Type: w.Type, Path: w.Path, Mode: w.Mode, Permissions: w.Permissions,
		Owner: w.Owner, Group: w.Group, ModifiedTime: w.ModifiedTime, SymlinkTarget: w.SymlinkTarget,
	}
	if len(w.Size) > 0 {
		text := string(w.Size)
		if uq, err := strconv.Unquote(text); err == nil {
			text = uq
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return fmt.Errorf("entry size %s: %w", w.Size, err)
		}
		e.Size = n
	}
	return nil
}

// fsCall is one unary call to envd's filesystem service.
func (c *Client) fsCall(ctx context.Context, sb *Sandbox, op, method string, class retryClass, body, reply any) error {
	if err := checkSandbox(sb); err != nil {
		return err
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("cube: %s: encode request: %w", op, err)
	}
	header := c.envdHeader(sb)
	header.Set("Connect-Protocol-Version", "1")
	rep, err := c.do(ctx, call{
		op: op, method: http.MethodPost, url: c.EnvdURL(sb) + "/filesystem.Filesystem/" + method,
		body: payload, contentType: "application/json", header: header, envd: true, class: class, ok: []int{http.StatusOK},
	})
	if err != nil {
		return err
	}
	if reply == nil {
		return nil
	}
	if err := decodeJSON(rep, reply); err != nil {
		return fmt.Errorf("cube: %s: %w", op, err)
	}
	return nil
}

type pathRequest struct {
	Path string `json:"path"`
}

// Stat describes a path in the sandbox (ErrNotFound when absent); a
// symlink is described, not followed.
func (c *Client) Stat(ctx context.Context, sb *Sandbox, path string) (Entry, error) {
	var out struct {
		Entry Entry `json:"entry"`
	}
	err := c.fsCall(ctx, sb, "stat "+path+" in sandbox "+sandboxID(sb), "Stat", retrySafe, pathRequest{path}, &out)
	return out.Entry, err
}

// ListDir lists a directory, depth levels deep (at least 1).
func (c *Client) ListDir(ctx context.Context, sb *Sandbox, path string, depth int) ([]Entry, error) {
	var out struct {
		Entries []Entry `json:"entries"`
	}
	err := c.fsCall(ctx, sb, "list "+path+" in sandbox "+sandboxID(sb), "ListDir", retrySafe,
		struct {
			Path  string `json:"path"`
			Depth int    `json:"depth"`
		}{path, max(depth, 1)}, &out)
	return out.Entries, err
}

// MakeDir makes a directory and its parents; ErrConflict when it exists.
func (c *Client) MakeDir(ctx context.Context, sb *Sandbox, path string) (Entry, error) {
	var out struct {
		Entry Entry `json:"entry"`
	}
	err := c.fsCall(ctx, sb, "make directory "+path+" in sandbox "+sandboxID(sb), "MakeDir", retryUnsent, pathRequest{path}, &out)
	return out.Entry, err
}

// Move renames source to destination in the sandbox.
func (c *Client) Move(ctx context.Context, sb *Sandbox, source, destination string) (Entry, error) {
	var out struct {
		Entry Entry `json:"entry"`
	}
	err := c.fsCall(ctx, sb, "move "+source+" to "+destination+" in sandbox "+sandboxID(sb), "Move", retryUnsent,
		struct {
			Source      string `json:"source"`
			Destination string `json:"destination"`
		}{source, destination}, &out)
	return out.Entry, err
}

// Remove deletes a file or a directory tree (ErrNotFound when absent).
func (c *Client) Remove(ctx context.Context, sb *Sandbox, path string) error {
	return c.fsCall(ctx, sb, "remove "+path+" in sandbox "+sandboxID(sb), "Remove", retrySafe, pathRequest{path}, nil)
}

func sandboxID(sb *Sandbox) string {
	if sb == nil {
		return ""
	}
	return sb.SandboxID
}
