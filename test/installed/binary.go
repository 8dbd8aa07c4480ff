package installed

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/move-operator/move-operator/hack/image"
)

var managerBinary struct {
	sync.Once
	path string
	err  error
}

// ManagerBinary returns the manager binary taken out of the host platform's
// image tarball (hack/image: the one `make image` wrote, named by
// MOVE_OPERATOR_IMAGE_DIR, else built now), once per test binary: what is
// shipped is what runs.
func ManagerBinary() (string, error) {
	managerBinary.Do(func() {
		tarball, err := image.HostTarball()
		if err != nil {
			managerBinary.err = fmt.Errorf("getting the manager's image: %w", err)
			return
		}
		// Beside its tarball, one file per platform: nothing is left in
		// the system's temporary directory, and a later call replaces it
		// (ExtractManager renames into place, so concurrent test binaries
		// each see a whole file).
		path := strings.TrimSuffix(tarball, filepath.Ext(tarball)) + "-manager"
		if err := image.ExtractManager(tarball, path); err != nil {
			managerBinary.err = fmt.Errorf("taking the manager out of %s: %w", tarball, err)
			return
		}
		managerBinary.path = path
	})
	return managerBinary.path, managerBinary.err
}
