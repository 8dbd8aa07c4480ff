package command

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/move-operator/move-operator/internal/remote"
	"github.com/move-operator/move-operator/test/localcluster"
)

// TestTheCommandAgainstRealClusters runs `manager target-access` as a user
// would, with the kubeconfig files of two local clusters.
func TestTheCommandAgainstRealClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two local clusters")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	manifest, err := os.ReadFile(filepath.Join("..", "..", "..", "dist", "target-access.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	source := start(ctx, t, "ta-source")
	target := start(ctx, t, "ta-target")
	sourceAdmin := newTestClient(t, source.Config)
	targetAdmin := newTestClient(t, target.Config)

	t.Run("one cluster given as both is refused before anything is applied", func(t *testing.T) {
		g := NewWithT(t)
		var stdout, stderr bytes.Buffer
		err := Run(ctx, []string{"--target-kubeconfig", target.KubeconfigPath, "--source-kubeconfig", target.KubeconfigPath}, manifest, &stdout, &stderr)
		g.Expect(err).To(MatchError(ContainSubstring("are the same cluster")))
		err = targetAdmin.Get(ctx, client.ObjectKey{Namespace: "move-operator-system", Name: "move-operator-target"}, &corev1.ServiceAccount{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the ServiceAccount must not exist yet: %v", err)
	})

	t.Run("writes a Secret in the source whose kubeconfig acts in the target as its ServiceAccount", func(t *testing.T) {
		g := NewWithT(t)
		var stdout, stderr bytes.Buffer
		err := Run(ctx, []string{
			"--target-kubeconfig", target.KubeconfigPath, "--source-kubeconfig", source.KubeconfigPath,
			"--namespace", "default", "--secret-name", "target-kubeconfig", "--duration", "2h",
		}, manifest, &stdout, &stderr)
		g.Expect(err).NotTo(HaveOccurred(), "stderr: %s", stderr.String())
		t.Logf("the command said:\n%s%s", stdout.String(), stderr.String())
		g.Expect(stdout.String()).To(And(
			ContainSubstring("ClusterRoleBinding move-operator-target"),
			ContainSubstring("minted a token for system:serviceaccount:move-operator-system:move-operator-target, valid until"),
			ContainSubstring("wrote the kubeconfig to Secret default/target-kubeconfig")))
		secret := &corev1.Secret{}
		g.Expect(sourceAdmin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "target-kubeconfig"}, secret)).To(Succeed())
		g.Expect(whoAmI(ctx, t, secret.Data["value"])).To(Equal("system:serviceaccount:move-operator-system:move-operator-target"))
	})

	t.Run("prints the Secret instead, reading nothing of the source", func(t *testing.T) {
		g := NewWithT(t)
		var stdout, stderr bytes.Buffer
		err := Run(ctx, []string{
			"--target-kubeconfig", target.KubeconfigPath, "--source-kubeconfig", filepath.Join(t.TempDir(), "none"),
			"--namespace", "ops", "--print",
		}, manifest, &stdout, &stderr)
		g.Expect(err).NotTo(HaveOccurred(), "stderr: %s", stderr.String())
		g.Expect(stderr.String()).To(ContainSubstring("minted a token"))
		secret := &corev1.Secret{}
		g.Expect(yaml.UnmarshalStrict(stdout.Bytes(), secret)).To(Succeed())
		g.Expect(secret.Namespace).To(Equal("ops"))
		g.Expect(secret.Name).To(Equal(DefaultSecretName))
		g.Expect(whoAmI(ctx, t, secret.Data["value"])).To(Equal("system:serviceaccount:move-operator-system:move-operator-target"))
	})
}

func start(ctx context.Context, t *testing.T, name string) *localcluster.Cluster {
	t.Helper()
	c, err := localcluster.Start(ctx, name, localcluster.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting local cluster %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping local cluster %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("the logs of %s are in %s", name, c.LogDir)
		} else {
			_ = c.RemoveLogs()
		}
	})
	return c
}

func newTestClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := newClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// whoAmI reads a kubeconfig as the operator does and asks its cluster who
// it is.
func whoAmI(ctx context.Context, t *testing.T, kubeconfig []byte) string {
	t.Helper()
	cfg, err := remote.ParseKubeconfig(kubeconfig, "the command's Secret")
	if err != nil {
		t.Fatalf("the operator refuses the kubeconfig: %v", err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := newTestClient(t, cfg).Create(ctx, review); err != nil {
		t.Fatalf("SelfSubjectReview with the kubeconfig: %v", err)
	}
	return review.Status.UserInfo.Username
}
