package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// modulePath identifies the repository root when walking up to go.mod.
const modulePath = "github.com/move-operator/move-operator"

// Names of the files a binary directory must hold.
const (
	etcdBinary        = "etcd"
	apiServerBinary   = "kube-apiserver"
	controllerManager = "kube-controller-manager"
	schedulerBinary   = "kube-scheduler"
	kwokBinary        = "kwok"
	kwokStagesFile    = "kwok-stages.yaml"
)

var requiredBinaryFiles = []string{etcdBinary, apiServerBinary, controllerManager, schedulerBinary, kwokBinary, kwokStagesFile}

var binaryDir struct {
	sync.Mutex
	dir string
	// of remembers BinaryDirOf's directories, by release.
	of map[string]string
}

// BinaryDir returns the directory holding etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok and kwok-stages.yaml.
//
// It is $KUBEBUILDER_ASSETS when set (make test sets it), otherwise the last
// line printed by hack/kube-binaries.sh, run from the repository root found by
// walking up from the working directory to the project's go.mod. The script
// builds what is missing (minutes, the first time) and caches it, so the demo
// and the benchmark need no setup. The result is remembered for the process.
func BinaryDir(ctx context.Context) (string, error) {
	binaryDir.Lock()
	defer binaryDir.Unlock()
	if binaryDir.dir != "" {
		return binaryDir.dir, nil
	}
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		var err error
		if dir, err = buildBinaries(ctx); err != nil {
			return "", err
		}
	}
	if err := checkBinaryDir(dir); err != nil {
		return "", err
	}
	binaryDir.dir = dir
	return dir, nil
}

// BinaryDirOf is BinaryDir for another Kubernetes release than the one the
// project builds against, one hack/kube-binaries.sh pins (such as "1.33"):
// its kube-apiserver, kube-controller-manager and kube-scheduler, with the
// same etcd and kwok. It is $KUBEBUILDER_ASSETS_<release> when set (dots
// made underscores: KUBEBUILDER_ASSETS_1_33, which make test sets), otherwise
// the directory the script prints when run with KUBE_VERSION=<release>.
func BinaryDirOf(ctx context.Context, release string) (string, error) {
	binaryDir.Lock()
	defer binaryDir.Unlock()
	if dir, ok := binaryDir.of[release]; ok {
		return dir, nil
	}
	dir := os.Getenv("KUBEBUILDER_ASSETS_" + strings.ReplaceAll(release, ".", "_"))
	if dir == "" {
		var err error
		if dir, err = buildBinaries(ctx, "KUBE_VERSION="+release); err != nil {
			return "", err
		}
	}
	if err := checkBinaryDir(dir); err != nil {
		return "", err
	}
	if binaryDir.of == nil {
		binaryDir.of = map[string]string{}
	}
	binaryDir.of[release] = dir
	return dir, nil
}

func checkBinaryDir(dir string) error {
	var missing []string
	for _, name := range requiredBinaryFiles {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("binary directory %s lacks %s: run hack/kube-binaries.sh and point KUBEBUILDER_ASSETS at the directory it prints",
			dir, strings.Join(missing, ", "))
	}
	return nil
}

// buildBinaries runs hack/kube-binaries.sh, with env added to the test's,
// and returns the directory it prints.
func buildBinaries(ctx context.Context, env ...string) (string, error) {
	root, err := repositoryRoot()
	if err != nil {
		return "", fmt.Errorf("KUBEBUILDER_ASSETS is unset and the kube binaries cannot be built: %w", err)
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "kube-binaries.sh"))
	cmd.Dir = root
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = &stdout
	// Progress of a first build takes minutes; let the user see it.
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running %shack/kube-binaries.sh in %s: %w", strings.Join(append(env, ""), " "), root, err)
	}
	var last string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			last = line
		}
	}
	if last == "" {
		return "", errors.New("hack/kube-binaries.sh printed no binary directory")
	}
	return last, nil
}

// repositoryRoot walks up from the working directory to the go.mod that
// declares this module.
func repositoryRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && goModDeclares(data, modulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func goModDeclares(goMod []byte, module string) bool {
	sc := bufio.NewScanner(bytes.NewReader(goMod))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == module
		}
	}
	return false
}
