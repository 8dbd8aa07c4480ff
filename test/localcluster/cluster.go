package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Node labels, annotation and taint of the fake nodes. Pods reach them by
// selecting NodeSelector and tolerating NodeTaint (see PodPlacement).
const (
	// FakeNodeAnnotation marks the nodes kwok manages.
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
	// FakeNodeValue is the value of FakeNodeAnnotation and of NodeTaint.
	FakeNodeValue = "fake"
	// NodeTypeLabel is set to "kwok" on every fake node.
	NodeTypeLabel = "type"
)

// NodeTaint keeps ordinary workloads off the fake nodes unless they tolerate it,
// as on any kwok cluster.
var NodeTaint = corev1.Taint{Key: FakeNodeAnnotation, Value: FakeNodeValue, Effect: corev1.TaintEffectNoSchedule}

// PodPlacement returns the node selector and tolerations a pod needs to be
// scheduled on the fake nodes of any local cluster.
func PodPlacement() (map[string]string, []corev1.Toleration) {
	return map[string]string{NodeTypeLabel: "kwok"}, []corev1.Toleration{{
		Key:      NodeTaint.Key,
		Operator: corev1.TolerationOpEqual,
		Value:    NodeTaint.Value,
		Effect:   NodeTaint.Effect,
	}}
}

// Options tune Start. The zero value is a good default.
type Options struct {
	// Dir holds the cluster's data, kubeconfig and logs. Default: a new
	// directory under os.TempDir(). Stop removes what Start put there but the
	// logs.
	Dir string
	// BinaryDir holds the Kubernetes binaries. Default: BinaryDir(ctx).
	BinaryDir string
	// Nodes is the number of fake nodes. Default 1.
	Nodes int
	// StartTimeout bounds Start as a whole. Default 3m: a start takes seconds
	// alone, but far longer when many test binaries start clusters at once.
	StartTimeout time.Duration
	// Logf receives progress lines, e.g. testing.T.Logf. Default: discarded.
	Logf func(format string, args ...any)
	// PodStartLatency is how long kwok waits before it makes a scheduled
	// pod Running and Ready (see podStartStages). Default 0: at once.
	PodStartLatency time.Duration
	// CACert and CAKey (PEM), when set, are the cluster's certificate
	// authority, as kubeadm sets one up: it signs the API server's serving
	// certificate, and every client certificate it signs authenticates.
	// That is what makes the cluster the workload cluster of a Cluster
	// whose <cluster>-ca Secret holds them (a self-hosted management
	// cluster, see package workload). Default: envtest's own CA.
	CACert, CAKey []byte
}

// Cluster is a running local management cluster.
type Cluster struct {
	// Name is the name given to Start; it names the kubeconfig context too.
	Name string
	// Index is the loopback index N of the cluster's address ranges.
	Index int
	// Config is a client configuration for a system:masters user, with a high
	// client-side rate limit (these API servers serve one test).
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for the same user, context Name.
	KubeconfigPath string
	// Dir is the working directory of the cluster.
	Dir string
	// LogDir holds one log file per process (etcd.log, kube-apiserver.log,
	// kube-controller-manager.log, kube-scheduler.log, kwok.log). It survives
	// Stop, so a failing test can name it.
	LogDir string
	// StartupDuration is how long Start took.
	StartupDuration time.Duration

	logf        func(format string, args ...any)
	env         *envtest.Environment
	launcher    *launcher
	processes   []*process
	reservation net.Listener
	openLogs    []*os.File
	ownDir      bool

	hooksMu   sync.Mutex
	stopHooks []func() error

	stopOnce sync.Once
	stopErr  error
}

// Start starts a local management cluster named name and returns when its API
// server answers, its fake nodes are Ready and kube-controller-manager runs.
// On error everything started is stopped again.
func Start(ctx context.Context, name string, opts Options) (_ *Cluster, err error) {
	began := time.Now()
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("local cluster name %q: %s", name, strings.Join(errs, "; "))
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	binDir := opts.BinaryDir
	if binDir == "" {
		if binDir, err = BinaryDir(ctx); err != nil {
			return nil, err
		}
	} else if err := checkBinaryDir(binDir); err != nil {
		return nil, err
	}

	c := &Cluster{Name: name, logf: opts.Logf, launcher: newLauncher()}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			if c.LogDir != "" {
				err = fmt.Errorf("%w (process logs in %s)", err, c.LogDir)
			}
		}
	}()

	if c.Index, c.reservation, err = reserveIndex(); err != nil {
		return nil, err
	}
	if err := c.makeDirs(opts.Dir); err != nil {
		return nil, err
	}
	if err := c.startControlPlane(binDir, opts.CACert, opts.CAKey); err != nil {
		return nil, err
	}
	if err := c.startComponents(binDir, opts.PodStartLatency); err != nil {
		return nil, err
	}
	if err := c.waitReady(ctx, opts.Nodes); err != nil {
		return nil, err
	}
	c.StartupDuration = time.Since(began)
	c.logf("local cluster %s ready in %s (services %s, pods %s, logs %s)",
		name, c.StartupDuration.Round(time.Millisecond), c.ServiceCIDR(), c.PodCIDR(), c.LogDir)
	return c, nil
}

func (c *Cluster) makeDirs(dir string) error {
	if dir == "" {
		removeStaleDirs()
		var err error
		if dir, err = os.MkdirTemp("", dirPrefix+c.Name+"-"); err != nil {
			return fmt.Errorf("creating the directory of local cluster %s: %w", c.Name, err)
		}
		c.ownDir = true
		if err := writeOwner(dir); err != nil {
			return fmt.Errorf("recording the owner of %s: %w", dir, err)
		}
	}
	c.Dir = dir
	c.LogDir = filepath.Join(dir, "logs")
	for _, d := range []string{c.LogDir, c.path("bin"), c.path("etcd"), c.path("pki")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	return nil
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

func (c *Cluster) logFile(component string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(c.LogDir, component+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the %s log: %w", component, err)
	}
	c.openLogs = append(c.openLogs, f)
	return f, nil
}

// startControlPlane starts etcd and kube-apiserver through envtest, then
// provisions the users the other components and clients authenticate as.
// With a CA, the API server serves and authenticates with it.
func (c *Cluster) startControlPlane(binDir string, caCert, caKey []byte) error {
	etcdWrapper, apiWrapper := c.path("bin", etcdBinary), c.path("bin", apiServerBinary)
	if err := writeExecWrapper(etcdWrapper, filepath.Join(binDir, etcdBinary)); err != nil {
		return err
	}
	if err := writeExecWrapper(apiWrapper, filepath.Join(binDir, apiServerBinary)); err != nil {
		return err
	}
	etcdLog, err := c.logFile(etcdBinary)
	if err != nil {
		return err
	}
	apiLog, err := c.logFile(apiServerBinary)
	if err != nil {
		return err
	}

	etcd := &envtest.Etcd{Path: etcdWrapper, DataDir: c.path("etcd"), Out: etcdLog, Err: etcdLog}
	// Durability buys nothing in a test cluster and fsync dominates etcd
	// latency on small machines.
	etcd.Configure().Set("unsafe-no-fsync", "true")
	apiServer := &envtest.APIServer{Path: apiWrapper, CertDir: c.path("pki"), Out: apiLog, Err: apiLog}
	apiServer.Configure().Set("service-cluster-ip-range", c.ServiceCIDR())
	// ServiceAccount: as envtest's default, pods need no token. TaintNodesByCondition:
	// it taints new nodes not-ready, and only the node lifecycle controller
	// would lift that taint, which needs kubelet heartbeats kwok's fast stages
	// do not send.
	apiServer.Configure().Set("disable-admission-plugins", "ServiceAccount,TaintNodesByCondition")
	auditIfAsked(apiServer, c.path(), c.LogDir)
	if caCert != nil {
		if err := c.serveWithCA(apiServer, caCert, caKey); err != nil {
			return err
		}
	}

	c.env = &envtest.Environment{
		ControlPlane:             envtest.ControlPlane{Etcd: etcd, APIServer: apiServer},
		BinaryAssetsDirectory:    binDir,
		UseExistingCluster:       ptr.To(false),
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  15 * time.Second,
	}
	var startErr error
	c.launcher.do(func() { _, startErr = c.env.Start() })
	if startErr != nil {
		return fmt.Errorf("starting etcd and kube-apiserver of local cluster %s: %w", c.Name, startErr)
	}

	admin, err := c.addUser("move-operator-admin")
	if err != nil {
		return err
	}
	c.Config = admin
	c.KubeconfigPath = c.path("kubeconfig")
	return writeKubeconfig(c.KubeconfigPath, c.Name, "admin", admin)
}

// serveWithCA makes the API server serve, on a free loopback port, a
// certificate the CA signs, and accept the client certificates it signs.
func (c *Cluster) serveWithCA(apiServer *envtest.APIServer, caCert, caKey []byte) error {
	authn, err := newCAAuthn(caCert, caKey)
	if err != nil {
		return fmt.Errorf("local cluster %s: %w", c.Name, err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	const host = "127.0.0.1"
	if err := authn.writeServingFiles(c.path("pki"), host); err != nil {
		return fmt.Errorf("local cluster %s: %w", c.Name, err)
	}
	apiServer.SecureServing = envtest.SecureServing{
		ListenAddr: envtest.ListenAddr{Address: host, Port: fmt.Sprint(port)},
		Authn:      authn,
		CA:         caCert,
	}
	return nil
}

// addUser provisions a client certificate user in system:masters.
func (c *Cluster) addUser(name string) (*rest.Config, error) {
	user, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}},
		&rest.Config{QPS: 500, Burst: 1000})
	if err != nil {
		return nil, fmt.Errorf("provisioning user %s in local cluster %s: %w", name, c.Name, err)
	}
	return rest.CopyConfig(user.Config()), nil
}

func writeKubeconfig(path, clusterName, userName string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[clusterName] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[userName] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: userName}
	kc.CurrentContext = clusterName
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// startComponents starts kube-controller-manager, kube-scheduler and kwok,
// each with its own system:masters user so the API server's logs tell them apart.
func (c *Cluster) startComponents(binDir string, podStartLatency time.Duration) error {
	stages, err := c.podStartStages(binDir, podStartLatency)
	if err != nil {
		return err
	}
	type component struct {
		binary string
		args   func(kubeconfig string) []string
	}
	components := []component{
		{controllerManager, func(kubeconfig string) []string {
			return []string{
				"--kubeconfig=" + kubeconfig,
				"--leader-elect=false",
				"--secure-port=0",
				// What a management cluster needs for provider Deployments:
				// rollouts, scaling, garbage collection of owned objects,
				// namespace deletion, default ServiceAccounts, and the
				// aggregation of ClusterRoles (the operator's roles take
				// a provider's kinds from labelled ClusterRoles). No
				// endpoint(slice) controllers: the API server rejects the
				// loopback pod IPs they would publish.
				"--controllers=deployment,replicaset,garbagecollector,namespace,serviceaccount,clusterrole-aggregation",
				"--use-service-account-credentials=false",
				"--kube-api-qps=200",
				"--kube-api-burst=400",
			}
		}},
		{schedulerBinary, func(kubeconfig string) []string {
			return []string{
				"--kubeconfig=" + kubeconfig,
				"--leader-elect=false",
				"--secure-port=0",
				"--kube-api-qps=200",
				"--kube-api-burst=400",
			}
		}},
		{kwokBinary, func(kubeconfig string) []string {
			return []string{
				"--kubeconfig=" + kubeconfig,
				"--config=" + stages,
				"--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=" + FakeNodeValue,
				// kwok's defaults are routable ranges; nothing in a test may
				// point anywhere but loopback.
				"--cidr=" + c.PodCIDR(),
				"--node-ip=" + fmt.Sprintf(nodeIPFormat, c.Index, 1),
			}
		}},
	}
	for _, comp := range components {
		cfg, err := c.addUser(comp.binary)
		if err != nil {
			return err
		}
		kubeconfig := c.path(comp.binary + ".kubeconfig")
		if err := writeKubeconfig(kubeconfig, c.Name, comp.binary, cfg); err != nil {
			return err
		}
		p, err := c.launcher.start(comp.binary, filepath.Join(binDir, comp.binary), comp.args(kubeconfig),
			filepath.Join(c.LogDir, comp.binary+".log"))
		if err != nil {
			return fmt.Errorf("local cluster %s: %w", c.Name, err)
		}
		c.processes = append(c.processes, p)
	}
	return nil
}

// waitReady creates the fake nodes and waits until kwok reports them Ready
// and kube-controller-manager has created the default ServiceAccount.
func (c *Cluster) waitReady(ctx context.Context, nodes int) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("creating a client for local cluster %s: %w", c.Name, err)
	}
	for i := range nodes {
		if _, err := cs.CoreV1().Nodes().Create(ctx, fakeNode(fmt.Sprintf("kwok-node-%d", i)), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating fake node %d in local cluster %s: %w", i, c.Name, err)
		}
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Check(); err != nil {
			return false, err
		}
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the API server may still settle; the deadline reports it
		}
		ready := 0
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready < nodes {
			return false, nil
		}
		_, err = cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the fake nodes of local cluster %s to become Ready and kube-controller-manager to run: %w", c.Name, err)
	}
	return nil
}

func fakeNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				FakeNodeAnnotation:             FakeNodeValue,
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				NodeTypeLabel:            "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{NodeTaint}},
		Status: corev1.NodeStatus{
			Allocatable: fakeNodeResources(),
			Capacity:    fakeNodeResources(),
		},
	}
}

func fakeNodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
}

// Check returns an error naming every component process that has exited.
// envtest's etcd and kube-apiserver are not covered: a dead API server shows
// in every request.
func (c *Cluster) Check() error {
	var errs []error
	for _, p := range c.processes {
		if done, err := p.exited(); done {
			errs = append(errs, fmt.Errorf("%s of local cluster %s exited (log: %s): %w",
				p.name, c.Name, filepath.Join(c.LogDir, p.name+".log"), err))
		}
	}
	return errors.Join(errs...)
}

// String names the cluster and where its logs are, for failure messages.
func (c *Cluster) String() string {
	return fmt.Sprintf("local cluster %s (index %d, logs in %s)", c.Name, c.Index, c.LogDir)
}

// Stop stops every process of the cluster and removes its data, keeping
// LogDir. It is safe to call more than once and on a partly started cluster.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

// AddStopHook registers f to run first when the cluster stops, for what lives
// in the test process but belongs to the cluster (webhook servers listening on
// its Service addresses). Hooks run in reverse order of registration.
func (c *Cluster) AddStopHook(f func() error) {
	c.hooksMu.Lock()
	defer c.hooksMu.Unlock()
	c.stopHooks = append(c.stopHooks, f)
}

func (c *Cluster) stop() error {
	var errs []error
	c.hooksMu.Lock()
	hooks := c.stopHooks
	c.stopHooks = nil
	c.hooksMu.Unlock()
	for i := len(hooks) - 1; i >= 0; i-- {
		errs = append(errs, hooks[i]())
	}
	// Components first, so they do not fill their logs with connection errors.
	for i := len(c.processes) - 1; i >= 0; i-- {
		if err := c.processes[i].stop(5 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if c.env != nil {
		if err := stopControlPlane(c.env); err != nil {
			errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver of local cluster %s: %w", c.Name, err))
		}
	}
	// Ends the launcher thread: anything still alive gets SIGKILL now.
	c.launcher.close()
	for _, f := range c.openLogs {
		_ = f.Close()
	}
	if c.reservation != nil {
		_ = c.reservation.Close()
	}
	if c.Dir != "" {
		// Only what Start created: Options.Dir may hold other things.
		created := []string{c.path("bin"), c.path("etcd"), c.path("pki"), c.KubeconfigPath}
		for _, comp := range []string{controllerManager, schedulerBinary, kwokBinary} {
			created = append(created, c.path(comp+".kubeconfig"))
		}
		for _, p := range created {
			if p == "" {
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, fmt.Errorf("cleaning up local cluster %s: %w", c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// RemoveLogs deletes LogDir, and Dir when Start created it; call it after
// Stop once the logs are no longer wanted (the tests passed).
func (c *Cluster) RemoveLogs() error {
	target := c.LogDir
	if c.ownDir {
		target = c.Dir
	}
	if target == "" {
		return nil
	}
	if err := os.RemoveAll(target); err != nil {
		return fmt.Errorf("removing the logs of local cluster %s: %w", c.Name, err)
	}
	return nil
}

// podStartStages returns the kwok stages the cluster runs with: the shared
// ones, or, with a latency, a copy of them in the cluster's directory whose
// pod-ready stage waits that long. kwok makes a scheduled pod Running and
// Ready at once; a real node pulls nothing for an image it holds, but
// starts the container, and a provider's manager reports Ready only once
// its caches are synced and its webhook server listens, and the kubelet
// sees it at the readiness probe's next period.
func (c *Cluster) podStartStages(binDir string, latency time.Duration) (string, error) {
	shared := filepath.Join(binDir, kwokStagesFile)
	if latency <= 0 {
		return shared, nil
	}
	content, err := os.ReadFile(shared)
	if err != nil {
		return "", fmt.Errorf("reading the kwok stages: %w", err)
	}
	const podReady = "  name: pod-ready\nspec:\n"
	if !strings.Contains(string(content), podReady) {
		return "", fmt.Errorf("the kwok stages %s have no pod-ready stage to delay", shared)
	}
	delayed := strings.Replace(string(content), podReady,
		fmt.Sprintf("%s  delay:\n    durationMilliseconds: %d\n", podReady, latency.Milliseconds()), 1)
	out := c.path(kwokStagesFile)
	if err := os.WriteFile(out, []byte(delayed), 0o644); err != nil {
		return "", fmt.Errorf("writing the kwok stages: %w", err)
	}
	return out, nil
}
