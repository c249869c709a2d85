package cubetest

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// entryInfo is envd's filesystem EntryInfo in protobuf JSON: size is an
// int64, hence a string; type is the FileType enum's name.
type entryInfo struct {
	Name          string `json:"name"`
	Type          string `json:"type"`
	Path          string `json:"path"`
	Size          string `json:"size"`
	Mode          uint32 `json:"mode"`
	Permissions   string `json:"permissions"`
	Owner         string `json:"owner"`
	Group         string `json:"group"`
	ModifiedTime  string `json:"modifiedTime"`
	SymlinkTarget string `json:"symlinkTarget,omitempty"`
}

func entryOf(p string, fi fs.FileInfo) entryInfo {
	e := entryInfo{
		Name: fi.Name(), Path: p, Size: strconv.FormatInt(fi.Size(), 10), Mode: uint32(fi.Mode().Perm()),
		Permissions: fi.Mode().String(), ModifiedTime: fi.ModTime().UTC().Format(time.RFC3339Nano), Type: "FILE_TYPE_FILE",
	}
	switch {
	case fi.IsDir():
		e.Type = "FILE_TYPE_DIRECTORY"
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "FILE_TYPE_SYMLINK"
		e.SymlinkTarget, _ = os.Readlink(p)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = strconv.Itoa(int(st.Uid)), strconv.Itoa(int(st.Gid))
		if u, err := user.LookupId(e.Owner); err == nil {
			e.Owner = u.Username
		}
		if g, err := user.LookupGroupId(e.Group); err == nil {
			e.Group = g.Name
		}
	}
	return e
}

// fsError answers a filesystem RPC failure with envd's Connect codes.
func fsError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeConnectError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, fs.ErrExist):
		writeConnectError(w, http.StatusConflict, "already_exists", err.Error())
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		writeConnectError(w, http.StatusForbidden, "permission_denied", err.Error())
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY):
		writeConnectError(w, http.StatusBadRequest, "invalid_argument", err.Error())
	case errors.Is(err, errGuestGone):
		writeConnectError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	default:
		writeConnectError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// filesystemRPC is envd's filesystem.Filesystem service: Stat, ListDir,
// MakeDir, Move and Remove, run in the sandbox's namespace.
func (s *Server) filesystemRPC(w http.ResponseWriter, r *http.Request, sb *sandbox, method string) {
	var req struct {
		Path        string `json:"path"`
		Depth       int    `json:"depth"`
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	if !readUnary(w, r, &req) {
		return
	}
	needPath := method != "Move"
	if (needPath && req.Path == "") || (!needPath && (req.Source == "" || req.Destination == "")) {
		writeConnectError(w, http.StatusBadRequest, "invalid_argument", "path is required")
		return
	}
	var reply any
	err := sb.inGuest(func() error {
		switch method {
		case "Stat":
			p := resolve(req.Path)
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			reply = map[string]any{"entry": entryOf(p, fi)}
		case "ListDir":
			root := resolve(req.Path)
			depth := max(req.Depth, 1)
			entries := []entryInfo{}
			var walk func(dir string, level int) error
			walk = func(dir string, level int) error {
				des, err := os.ReadDir(dir)
				if err != nil {
					return err
				}
				for _, de := range des {
					p := filepath.Join(dir, de.Name())
					fi, err := os.Lstat(p)
					if err != nil {
						continue
					}
					entries = append(entries, entryOf(p, fi))
					if fi.IsDir() && level < depth {
						if err := walk(p, level+1); err != nil {
							return err
						}
					}
				}
				return nil
			}
			if err := walk(root, 1); err != nil {
				return err
			}
			reply = map[string]any{"entries": entries}
		case "MakeDir":
			p := resolve(req.Path)
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%s: %w", p, fs.ErrExist)
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			reply = map[string]any{"entry": entryOf(p, fi)}
		case "Move":
			src, dst := resolve(req.Source), resolve(req.Destination)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.Rename(src, dst); err != nil {
				return err
			}
			fi, err := os.Lstat(dst)
			if err != nil {
				return err
			}
			reply = map[string]any{"entry": entryOf(dst, fi)}
		case "Remove":
			p := resolve(req.Path)
			if _, err := os.Lstat(p); err != nil {
				return err
			}
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			reply = map[string]any{}
		}
		return nil
	})
	if err != nil {
		fsError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}
