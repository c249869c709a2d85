package boundary

// DefaultCredentialPaths are hidden from every World at the sandbox and strict
// levels, relative to the user's home. Each holds a key, a token or a session a
// hostile command could use to act as the user elsewhere.
var DefaultCredentialPaths = []string{
	// Keys and agents' sockets' keys.
	".ssh",
	".gnupg",
	// Cloud and cluster credentials.
	".aws",
	".azure",
	".config/gcloud",
	".kube",
	".docker/config.json",
	".oci",
	".terraform.d/credentials.tfrc.json",
	".vault-token",
	// Git and forge tokens.
	".netrc",
	".git-credentials",
	".config/gh",
	".config/hub",
	".config/glab-cli",
	// Token-bearing rc files of package managers and databases: each can hold
	// a publish token or a password in clear.
	".npmrc",
	".yarnrc.yml",
	".pypirc",
	".cargo/credentials",
	".cargo/credentials.toml",
	".gem/credentials",
	".m2/settings-security.xml",
	".gradle/gradle.properties",
	".pgpass",
	".my.cnf",
	// Password stores and keyrings.
	".password-store",
	".local/share/keyrings",
	".config/op",
	// Browser profiles: cookies are sessions.
	".mozilla",
	".config/google-chrome",
	".config/chromium",
	".config/BraveSoftware",
	".config/microsoft-edge",
	".var/app/org.mozilla.firefox",
	"snap/firefox",
}
