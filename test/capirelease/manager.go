package capirelease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/move-operator/move-operator/test/podprocess"
)

// runPorts are the loopback ports one run of a manager listens on.
type runPorts struct {
	webhook, health int
}

// tokenLifetime is what the token of one run asks for: longer than any
// test, as a kubelet rotates the projected token long before it expires.
const tokenLifetime = 24 * 60 * 60

// start runs the provider's manager while its Deployment has a Ready pod.
func (p *Provider) start(ctx context.Context) error {
	r, err := podprocess.Start(ctx, podprocess.Options{
		Config:    p.cluster.Config,
		Namespace: p.Namespace,
		Selector:  p.podSelector,
		Finalizer: ProcessFinalizer,
		Command:   p.command,
		LogPath:   p.LogPath,
		Started: func(run podprocess.Run) {
			p.mu.Lock()
			ports := p.ports[string(run.PodUID)]
			p.mu.Unlock()
			p.endpoint.openWhenReady(
				"http://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.health))+"/readyz",
				net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.webhook)))
		},
		Stopping: func(run podprocess.Run) {
			// The pod leaves its Service's endpoints as it starts
			// terminating, before its process has finished.
			_ = p.endpoint.closeNow()
			p.mu.Lock()
			delete(p.ports, string(run.PodUID))
			p.mu.Unlock()
		},
	})
	if err != nil {
		return fmt.Errorf("running the manager of provider %s: %w", p.Name, err)
	}
	p.runner = r
	return nil
}

// command is what a kubelet would run for the manager container of pod:
// its args as the Deployment has them, then what a local cluster needs
// instead of a pod's network and mounts. The manager authenticates with a
// token of its ServiceAccount bound to the pod, so it meets the release's
// own RBAC.
func (p *Provider) command(ctx context.Context, pod *corev1.Pod) (podprocess.Command, error) {
	var container *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "manager" {
			container = &pod.Spec.Containers[i]
		}
	}
	if container == nil {
		return podprocess.Command{}, fmt.Errorf("pod %s/%s has no manager container", pod.Namespace, pod.Name)
	}
	kubeconfig, err := p.podKubeconfig(ctx, pod)
	if err != nil {
		return podprocess.Command{}, err
	}
	webhookPort, err := freePort()
	if err != nil {
		return podprocess.Command{}, err
	}
	healthPort, err := freePort()
	if err != nil {
		return podprocess.Command{}, err
	}
	p.mu.Lock()
	p.ports[string(pod.UID)] = runPorts{webhook: webhookPort, health: healthPort}
	p.mu.Unlock()
	env, err := containerEnv(pod, container)
	if err != nil {
		return podprocess.Command{}, err
	}
	args := append([]string{}, container.Args...)
	// Later flags win: these replace the container's.
	args = append(args,
		"--kubeconfig="+kubeconfig,
		// Its own free port on every address (no flag sets the host): the
		// Service endpoint passes ClusterIP:443 to it.
		"--webhook-port="+strconv.Itoa(webhookPort),
		"--webhook-cert-dir="+p.certDir,
		// The readiness probe's port, on loopback only.
		"--health-addr=127.0.0.1:"+strconv.Itoa(healthPort),
		// No metrics: three managers per cluster, and clusters side by
		// side, would all want :8443.
		"--diagnostics-address=0",
		// Out of a pod controller-runtime cannot tell the namespace of its
		// Lease (it reads the pod's service account mount), and the
		// release has no flag for it: the manager exits at once. One
		// process runs per Deployment anyway.
		"--leader-elect=false",
	)
	return podprocess.Command{
		Path:    p.Binary,
		Args:    args,
		Env:     env,
		Cleanup: func() { _ = os.Remove(kubeconfig) },
	}, nil
}

// podKubeconfig writes a kubeconfig with a token of the pod's
// ServiceAccount bound to the pod, as the kubelet projects into it: it
// stops authenticating once the pod is gone.
func (p *Provider) podKubeconfig(ctx context.Context, pod *corev1.Pod) (string, error) {
	sa := pod.Spec.ServiceAccountName
	tr, err := p.clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](tokenLifetime),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of ServiceAccount %s/%s for pod %s: %w", pod.Namespace, sa, pod.Name, err)
	}
	cfg := p.cluster.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["pod"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: sa, Namespace: pod.Namespace}
	kc.CurrentContext = "pod"
	path := filepath.Join(p.runDir, "kubeconfig-"+string(pod.UID))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing the kubeconfig of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return path, nil
}

// containerEnv resolves a container's environment as a kubelet does, for
// what the Cluster API managers use: values, and the pod's name, namespace
// and UID.
func containerEnv(pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	var env []string
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, fmt.Errorf("container %s of pod %s/%s: env %s comes from something other than a pod field", c.Name, pod.Namespace, pod.Name, e.Name)
			}
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				value = pod.Name
			case "metadata.namespace":
				value = pod.Namespace
			case "metadata.uid":
				value = string(pod.UID)
			case "spec.serviceAccountName":
				value = pod.Spec.ServiceAccountName
			case "spec.nodeName":
				value = pod.Spec.NodeName
			case "status.podIP":
				value = pod.Status.PodIP
			default:
				return nil, fmt.Errorf("container %s of pod %s/%s: env %s from field %s is not resolved here", c.Name, pod.Namespace, pod.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return env, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Serving reports whether the provider's webhooks are served at its
// Service now: its manager runs and answered its readiness probe.
func (p *Provider) Serving() bool {
	on, _, _ := p.endpoint.state()
	return on
}

// WaitServing waits until the provider's webhooks are served at its
// Service (true), or refused there (false).
func (p *Provider) WaitServing(ctx context.Context, serving bool) error {
	for {
		on, changed, openErr := p.endpoint.state()
		if on == serving {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("waiting for the webhooks of provider %s %s to be serving=%t (manager log: %s): %w",
				p.Name, p.Version, serving, p.LogPath, ctx.Err()), openErr, p.runner.Err(), lastRunErr(p.runner.Runs()))
		case <-changed:
		}
	}
}

func lastRunErr(runs []podprocess.Run) error {
	if len(runs) == 0 {
		return nil
	}
	last := runs[len(runs)-1]
	if last.Err == nil {
		return nil
	}
	return fmt.Errorf("its last run (pod %s) ended: %w", last.Pod, last.Err)
}

// Running reports whether the provider's manager process runs now.
func (p *Provider) Running() bool { return p.runner.Running() }

// WaitRunning waits until the manager process runs (true), or has exited
// and its pod is released (false).
func (p *Provider) WaitRunning(ctx context.Context, running bool) error {
	return p.runner.WaitRunning(ctx, running)
}

// Runs returns the lives of the manager process so far, oldest first.
func (p *Provider) Runs() []podprocess.Run { return p.runner.Runs() }
