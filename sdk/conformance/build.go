package conformance

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// BuildBinary builds the plugin's main package pkg (an import path, or a
// directory relative to the test's package such as
// "./cmd/memhost-plugin-journal") into a temporary directory with the go
// command, and answers the executable's path for Target.Binary. The build
// inherits the environment, GOFLAGS included. The test is skipped when no
// go command is found.
func BuildBinary(t testing.TB, pkg string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build %s with: %v", pkg, err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	out, err := exec.Command(gobin, "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// WriteManifest writes, into a temporary directory, the manifest that
// `memhost plugins manifest` writes for binary and a plugin reporting
// info, and answers its path for Target.Manifest.
func WriteManifest(t testing.TB, info sdk.Info, binary string) string {
	t.Helper()
	sum, err := fileSHA256(binary)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(host.ManifestFor(info, filepath.Base(binary), hex.EncodeToString(sum)), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), info.Name+host.ManifestSuffix)
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
