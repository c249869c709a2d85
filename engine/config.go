package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
)

// Config is config.toml. Every field is optional.
type Config struct {
	// Backend is the default runtime for new Worlds: "local" or "cube".
	Backend string `toml:"backend"`
	// MountBackend is the default overlay backend: auto, kernel,
	// fuse-overlayfs or unionfs-fuse.
	MountBackend string `toml:"mount_backend"`
	// Isolation is the default isolation for sessions: tree or strict.
	Isolation string `toml:"isolation"`
	// StrictBinds are read-write binds kept in strict isolation (e.g. a build cache).
	StrictBinds []string `toml:"strict_binds"`
	// Ignore lists gitignore-style patterns left out of change sets, in
	// addition to .git/.
	Ignore []string `toml:"ignore"`
	// EnvRedact lists glob patterns of environment names whose values are not
	// recorded in session metadata.
	EnvRedact []string `toml:"env_redact"`
	// AutoSnapshot takes a snapshot before each exec.
	AutoSnapshot bool `toml:"auto_snapshot"`
	// Theme is dark, light, high-contrast, auto or a path to a TOML theme.
	Theme string `toml:"theme"`
	// Keys maps action names to key lists, overriding the defaults.
	Keys map[string][]string `toml:"keys"`
	// Colors maps colour roles to colours, overriding the theme.
	Colors map[string]string `toml:"colors"`
	// Cube configures the CubeSandbox runtime.
	Cube CubeConfig `toml:"cube"`

	path string
}

// CubeConfig is the [cube] table.
type CubeConfig struct {
	Endpoint   string         `toml:"endpoint"`
	APIKeyEnv  string         `toml:"api_key_env"` // name of the env var holding the key; never the key itself
	AuthHeader string         `toml:"auth_header"` // x-api-key (default) or bearer
	Template   string         `toml:"template"`
	ProxyAddr  string         `toml:"proxy_addr"`
	EnvdScheme string         `toml:"envd_scheme"` // http (default) or https
	Domain     string         `toml:"domain"`
	MountPoint string         `toml:"mount_point"` // where the World appears in the guest; default the source path
	GuestDir   string         `toml:"guest_dir"`   // where the host mounts go in the guest; default /mnt/strata
	Timeout    int            `toml:"timeout"`     // sandbox idle timeout in seconds: 0 server default, -1 never
	Templates  []CubeTemplate `toml:"templates"`
}

// CubeTemplate maps a resource size to a template id.
type CubeTemplate struct {
	ID       string `toml:"id"`
	CPU      int    `toml:"cpu"`       // millicores
	MemoryMB int    `toml:"memory_mb"` //
	DiskMB   int    `toml:"disk_mb"`   //
}

// Path is the file the config was read from ("" for defaults).
func (c *Config) Path() string { return c.path }

// LoadConfig reads config.toml; a missing file is the defaults. Unknown keys
// are an error naming them, so a typo is not silently ignored.
func LoadConfig(path string) (*Config, error) {
	c := &Config{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c.withDefaults(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	md, err := toml.Decode(string(data), c)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, 0, len(und))
		for _, k := range und {
			keys = append(keys, k.String())
		}
		return nil, fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	c.path = path
	return c.withDefaults(), c.validate()
}

func (c *Config) withDefaults() *Config {
	if c.Backend == "" {
		c.Backend = "local"
	}
	if c.MountBackend == "" {
		c.MountBackend = "auto"
	}
	if c.Isolation == "" {
		c.Isolation = "tree"
	}
	if len(c.EnvRedact) == 0 {
		c.EnvRedact = []string{"*TOKEN*", "*SECRET*", "*PASSWORD*", "*KEY*", "*CREDENTIAL*"}
	}
	return c
}

func (c *Config) validate() error {
	switch c.Backend {
	case "local", "cube":
	default:
		return fmt.Errorf("config %s: backend %q: want local or cube", c.path, c.Backend)
	}
	switch c.MountBackend {
	case "auto", "kernel", "fuse-overlayfs", "unionfs-fuse":
	default:
		return fmt.Errorf("config %s: mount_backend %q: want auto, kernel, fuse-overlayfs or unionfs-fuse", c.path, c.MountBackend)
	}
	switch c.Isolation {
	case "tree", "strict":
	default:
		return fmt.Errorf("config %s: isolation %q: want tree or strict", c.path, c.Isolation)
	}
	return nil
}
