//go:build cluster

package olderkubernetes_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/mover"
	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

// release is the Kubernetes release of both clusters' control planes.
const release = "1.33"

// TestMain starts the package's pair of clusters (movetest.Env, which
// movetest's helpers use too) with Cluster API installed; no provider
// controllers run: a move needs only their webhooks.
func TestMain(m *testing.M) {
	movetest.Main(m, testenv.Options{CAPI: true, Kubernetes: release})
}

// startOperator installs the operator in the source as users of Kubernetes
// 1.30 to 1.35 install it (dist/install.yaml, whose MutatingAdmissionPolicy
// and binding the API server refuses as unknown kinds), gives it its access
// to the target, and runs its manager until the test ends.
func startOperator(t *testing.T) *mover.Operator {
	t.Helper()
	root, err := testenv.RepositoryRoot("go test ./test/olderkubernetes/")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	op, err := mover.StartOperator(ctx, movetest.Env, root, t.TempDir())
	if err != nil {
		t.Fatalf("installing and starting the operator: %v", err)
	}
	t.Cleanup(func() {
		if err := op.Stop(); err != nil {
			t.Errorf("stopping the operator (its log: %s): %v", op.LogPath(), err)
		}
	})
	return op
}

// scheme knows the core kinds, RBAC and MoveOperations.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(movev1alpha1.AddToScheme(s))
	return s
}()

// as returns a client of the source that acts as user: the admin's
// credentials, impersonating, so that RBAC and the admission policy see
// that user alone (the API server adds system:authenticated).
func as(t *testing.T, user string) client.Client {
	t.Helper()
	c, err := client.New(installed.Impersonating(movetest.Env.Source.Config, user), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// admin is the source's administrator, for setting up and inspecting.
func admin(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(movetest.Env.Source.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
