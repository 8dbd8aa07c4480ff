//go:build cluster

package workload_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/localcluster"
	"github.com/move-operator/move-operator/test/workload"
)

// TestALocalClusterServesAsTheWorkloadClusterOfACluster starts a local
// cluster with a cluster's certificates and serves it as that cluster's
// workload cluster, as a pivot needs: the kubeconfig Cluster API would keep
// in <cluster>-kubeconfig reaches it, and a Machine's Node with the static
// pods KubeadmControlPlane checks is registered in it. A cluster started
// with envtest's own CA is refused: no kubeconfig made with the cluster's
// Secrets would reach it.
func TestALocalClusterServesAsTheWorkloadClusterOfACluster(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	certs, err := workload.NewCertificates()
	g.Expect(err).NotTo(HaveOccurred())
	c, err := localcluster.Start(ctx, "selfhosted", localcluster.Options{CACert: certs.CA.Cert, CAKey: certs.CA.Key, Logf: t.Logf})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		g.Expect(c.Stop()).To(Succeed())
		if !t.Failed() {
			g.Expect(c.RemoveLogs()).To(Succeed())
		}
	})
	s, err := workload.OnCluster(c, certs)
	g.Expect(err).NotTo(HaveOccurred())
	host, port := s.Endpoint()
	g.Expect(strings.TrimSuffix(c.Config.Host, "/")).To(Equal(fmt.Sprintf("https://%s:%d", host, port)))

	kubeconfig, err := s.Kubeconfig("mgmt")
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	viaSecret, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(s.AddNode(ctx, workload.Node{
		Name: "mgmt-cp-0", ProviderID: "loop:///mgmt/mgmt-cp-0", ControlPlane: true, InternalIP: "127.98.250.1",
		Info: corev1.NodeSystemInfo{KubeletVersion: "v1.34.2"},
	})).To(Succeed())
	node := &corev1.Node{}
	g.Expect(viaSecret.Get(ctx, client.ObjectKey{Name: "mgmt-cp-0"}, node)).To(Succeed(), "the cluster's kubeconfig reaches the management cluster")
	g.Expect(node.Spec.ProviderID).To(Equal("loop:///mgmt/mgmt-cp-0"))
	pod := &corev1.Pod{}
	g.Expect(viaSecret.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-apiserver-mgmt-cp-0"}, pod)).To(Succeed())
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))

	other, err := localcluster.Start(ctx, "ownca", localcluster.Options{Logf: t.Logf})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		g.Expect(other.Stop()).To(Succeed())
		if !t.Failed() {
			g.Expect(other.RemoveLogs()).To(Succeed())
		}
	})
	_, err = workload.OnCluster(other, certs)
	g.Expect(err).To(MatchError(ContainSubstring("does not serve with the workload certificates' CA")))
}
