package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// ModulePath is this repository's Go module.
const ModulePath = "github.com/move-operator/move-operator"

// RepositoryRoot walks up from the working directory to this module's
// go.mod. command names what to run from inside the repository, for the
// error when the working directory is elsewhere (such as "make demo").
func RepositoryRoot(command string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(data, []byte("module "+ModulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run %s from inside the %s repository", command, ModulePath)
		}
		dir = parent
	}
}
