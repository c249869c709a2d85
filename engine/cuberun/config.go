package cuberun

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
	// BaseImage is the container image strata builds a template from
	// (POST /templates) when none fits the resources a World asks for;
	// "" = never build, report that none fits.
	BaseImage string `toml:"base_image"`
	// BuildTimeout bounds one such build in seconds (default 1800: builds
	// pull and convert an image).
	BuildTimeout int `toml:"build_timeout"`
}

// CubeTemplate maps a resource size to a template id.
type CubeTemplate struct {
	ID       string `toml:"id"`
	CPU      int    `toml:"cpu"`       // millicores
	MemoryMB int    `toml:"memory_mb"` //
	DiskMB   int    `toml:"disk_mb"`   //
}
