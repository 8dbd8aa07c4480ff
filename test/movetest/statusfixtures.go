//go:build cluster

package movetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// captureStatusEnv names a directory; when set, the tests write there the
// MoveOperations they watch, one file per test and phase, as the fixtures of
// the Argo CD health check's test (config/argocd). Unset, nothing is written.
const captureStatusEnv = "MOVE_OPERATOR_CAPTURE_STATUS"

var captured sync.Map

// captureStatus writes mo, as the API server returned it, to
// $MOVE_OPERATOR_CAPTURE_STATUS/<test>-<phase>.json the first time the test
// sees that phase.
func captureStatus(t *testing.T, mo *movev1alpha1.MoveOperation) {
	t.Helper()
	dir := os.Getenv(captureStatusEnv)
	if dir == "" || mo.Status.Phase == "" {
		return
	}
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + string(mo.Status.Phase) + ".json"
	if _, done := captured.LoadOrStore(name, true); done {
		return
	}
	out := mo.DeepCopy()
	out.APIVersion, out.Kind = movev1alpha1.GroupVersion.String(), "MoveOperation"
	// Only what a health check reads: identity, spec and status.
	out.ObjectMeta = metav1.ObjectMeta{Name: mo.Name, Namespace: mo.Namespace, Generation: mo.Generation}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Errorf("capturing the status of %s/%s: %v", mo.Namespace, mo.Name, err)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("capturing the status: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o644); err != nil {
		t.Errorf("capturing the status: %v", err)
	}
}
