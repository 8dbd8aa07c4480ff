//go:build cluster

package localcluster_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/localcluster"
	"github.com/move-operator/move-operator/test/testenv"
)

var env *testenv.Env

// orphanHelperEnv makes the test binary start one cluster, print its
// directory and wait to be killed (see TestChildProcessesDieWithTheTestProcess).
const orphanHelperEnv = "LOCALCLUSTER_TEST_ORPHAN_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(orphanHelperEnv) != "" {
		runOrphanHelper()
		return
	}
	testenv.Main(m, testenv.Options{}, &env)
}

func TestADeploymentBecomesAvailableAndScalesToZero(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, m := range []*testenv.Management{env.Source, env.Target} {
		ns := testenv.NewNamespace(t, m, "rollout")
		nodeSelector, tolerations := localcluster.PodPlacement()
		labels := map[string]string{"app": "rollout"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rollout"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeSelector: nodeSelector,
						Tolerations:  tolerations,
						Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
					},
				},
			},
		}
		began := time.Now()
		g.Expect(m.Client.Create(ctx, d)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.AvailableReplicas).To(BeEquivalentTo(2))
		}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
			Should(Succeed(), "kube-controller-manager, kube-scheduler and kwok should roll the Deployment out in %s", m.Cluster)
		t.Logf("%s: Deployment Available after %s", m.Name, time.Since(began).Round(time.Millisecond))

		pods := &corev1.PodList{}
		g.Expect(m.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Status.PodIP).To(HavePrefix(strings.TrimSuffix(m.PodCIDR(), "0/24")),
				"kwok must hand out loopback pod IPs only")
		}

		began = time.Now()
		d.Spec.Replicas = ptr.To[int32](0)
		g.Expect(m.Client.Update(ctx, d)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(m.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
			g.Expect(m.Client.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.Replicas).To(BeZero())
		}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).
			Should(Succeed(), "the Deployment should scale to zero and its pods disappear in %s", m.Cluster)
		t.Logf("%s: Deployment at zero after %s", m.Name, time.Since(began).Round(time.Millisecond))
	}
}

func TestTwoClustersAreSeparate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Source.Index).NotTo(Equal(env.Target.Index))
	g.Expect(env.Source.ServiceCIDR()).NotTo(Equal(env.Target.ServiceCIDR()))
	g.Expect(env.Source.Config.Host).NotTo(Equal(env.Target.Config.Host))

	ns := testenv.NewNamespace(t, env.Source, "separate")
	err := env.Target.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	g.Expect(err).To(HaveOccurred(), "a namespace created in the source must not exist in the target")

	for _, m := range []*testenv.Management{env.Source, env.Target} {
		kubeconfig, err := os.ReadFile(m.KubeconfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(kubeconfig)).To(ContainSubstring("current-context: " + m.Name))
		g.Expect(m.Check()).To(Succeed())
	}
}

// TestChildProcessesDieWithTheTestProcess kills a process that runs a local
// cluster with SIGKILL, as a test timeout or a crash would end it, and checks
// that none of the cluster's processes survive it.
func TestChildProcessesDieWithTheTestProcess(t *testing.T) {
	g := NewWithT(t)
	self, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	helper := exec.Command(self, "-test.run=^$")
	helper.Env = append(os.Environ(), orphanHelperEnv+"=1")
	helper.Stderr = os.Stderr
	stdout, err := helper.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(helper.Start()).To(Succeed())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var dir string
	select {
	case line, ok := <-lines:
		g.Expect(ok).To(BeTrue(), "the helper exited before starting its cluster")
		dir = strings.TrimPrefix(line, "dir=")
	case <-time.After(60 * time.Second):
		t.Fatal("the helper did not start its cluster within 60s")
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	g.Expect(processesMentioning(dir)).To(HaveLen(5), "etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok should run")

	g.Expect(helper.Process.Signal(syscall.SIGKILL)).To(Succeed())
	_ = helper.Wait()
	g.Eventually(func() []string { return processesMentioning(dir) }).WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).
		Should(BeEmpty(), "no process of the cluster may outlive the process that started it")
}

func runOrphanHelper() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	c, err := localcluster.Start(ctx, "orphan", localcluster.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("dir=%s\n", c.Dir)
	select {} // until killed
}

// processesMentioning lists the command lines of processes that mention dir.
func processesMentioning(dir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		found = append(found, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}
