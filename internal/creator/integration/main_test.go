//go:build cluster

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, &env)
}

var setupOnce struct {
	sync.Once
	err error
}

// ensureInstalled installs the MoveOperation CRD and dist/install.yaml's
// RBAC and admission policies in the source, once.
func ensureInstalled(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() {
		root, err := testenv.RepositoryRoot("go test ./internal/creator/integration/")
		if err != nil {
			setupOnce.err = err
			return
		}
		if _, err := envtest.InstallCRDs(env.Source.Config, envtest.CRDInstallOptions{
			Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
		}); err != nil {
			setupOnce.err = fmt.Errorf("installing the MoveOperation CRD: %w", err)
			return
		}
		in, err := installed.Read(root)
		if err != nil {
			setupOnce.err = err
			return
		}
		dir, err := os.MkdirTemp("", "creator-integration-")
		if err != nil {
			setupOnce.err = err
			return
		}
		_, setupOnce.err = in.Grant(context.Background(), env.Source.Config, dir)
	})
	if setupOnce.err != nil {
		t.Fatalf("installing the operator's RBAC and admission policies: %v", setupOnce.err)
	}
}

// as returns a client of the source that acts as user: the admin's
// credentials, impersonating, so that RBAC and the admission policies see
// that user alone (the API server adds system:authenticated).
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Source.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// scheme knows the core kinds, RBAC and MoveOperations.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(movev1alpha1.AddToScheme(s))
	return s
}()

// admin is the source's administrator, for setting up and inspecting.
func admin(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(env.Source.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
