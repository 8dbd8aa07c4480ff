package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/localcluster"
)

// Options tune Start.
type Options struct {
	// BinaryDir holds the Kubernetes binaries. Default: localcluster.BinaryDir.
	BinaryDir string
	// Logf receives progress lines. Default: discarded.
	Logf func(format string, args ...any)
}

// Server is an API server the workload clusters of a test environment
// point at: the shared workload API server (Start), or a local management
// cluster that is itself the workload cluster of one Cluster (OnCluster,
// a self-hosted management cluster).
type Server struct {
	// Client is a system:masters client of the server.
	Client client.Client
	// LogDir holds the server's process logs.
	LogDir string

	url        string
	host       string
	port       int32
	certs      *Certificates
	addAdmin   func() (*rest.Config, error)
	stop       func() error
	removeLogs func() error
}

// Start generates the workload clusters' certificates and starts the
// workload API server with them.
func Start(ctx context.Context, opts Options) (*Server, error) {
	certs, err := NewCertificates()
	if err != nil {
		return nil, fmt.Errorf("generating the workload clusters' certificates: %w", err)
	}
	api, err := localcluster.StartAPIServer(ctx, "workload", localcluster.APIServerOptions{
		BinaryDir: opts.BinaryDir,
		CACert:    certs.CA.Cert,
		CAKey:     certs.CA.Key,
		Logf:      opts.Logf,
	})
	if err != nil {
		return nil, err
	}
	s := &Server{
		LogDir: api.LogDir, url: api.URL(), host: api.Host, port: int32(api.Port), certs: certs,
		addAdmin:   func() (*rest.Config, error) { return api.AddUser("kubernetes-admin", "system:masters") },
		stop:       api.Stop,
		removeLogs: api.RemoveLogs,
	}
	if s.Client, err = client.New(api.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, errors.Join(fmt.Errorf("creating a client for the workload API server: %w", err), api.Stop())
	}
	return s, nil
}

// OnCluster serves as workload cluster the local cluster c, which must
// have been started with certs' CA (localcluster.Options.CACert): a
// management cluster that a Cluster of a fleet stands for, so that its
// control-plane endpoint, kubeconfig and Nodes are the cluster's own, as
// after a pivot. Stop and RemoveLogs leave c to whoever started it.
func OnCluster(c *localcluster.Cluster, certs *Certificates) (*Server, error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("the address of %s: %w", c, err)
	}
	port, err := strconv.ParseInt(u.Port(), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("the port of %s: %w", c, err)
	}
	if !bytes.Equal(c.Config.CAData, certs.CA.Cert) {
		return nil, fmt.Errorf("%s does not serve with the workload certificates' CA: start it with localcluster.Options.CACert", c)
	}
	s := &Server{
		LogDir: c.LogDir, url: u.Scheme + "://" + u.Host, host: u.Hostname(), port: int32(port), certs: certs,
		addAdmin: func() (*rest.Config, error) {
			cfg, _, err := c.AddUser("kubernetes-admin")
			return cfg, err
		},
		stop:       func() error { return nil },
		removeLogs: func() error { return nil },
	}
	if s.Client, err = client.New(c.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, fmt.Errorf("creating a client for %s: %w", c, err)
	}
	return s, nil
}

// Stop stops the workload API server (not a cluster served by OnCluster).
func (s *Server) Stop() error { return s.stop() }

// RemoveLogs removes the server's logs; call it after Stop.
func (s *Server) RemoveLogs() error { return s.removeLogs() }

// Endpoint is the control plane endpoint of every workload cluster served
// here.
func (s *Server) Endpoint() (host string, port int32) { return s.host, s.port }

// Certificates returns the certificates every workload cluster served here
// shares.
func (s *Server) Certificates() Certificates { return *s.certs }

// Kubeconfig returns an admin kubeconfig for the named workload cluster,
// laid out as KubeadmControlPlane writes <cluster>-kubeconfig: cluster
// <name>, user <name>-admin, context <name>-admin@<name>, a client
// certificate signed by the cluster CA.
func (s *Server) Kubeconfig(cluster string) ([]byte, error) {
	cfg, err := s.addAdmin()
	if err != nil {
		return nil, err
	}
	user, ctxName := cluster+"-admin", cluster+"-admin@"+cluster
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cluster] = &clientcmdapi.Cluster{Server: s.url, CertificateAuthorityData: s.certs.CA.Cert}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts[ctxName] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: user}
	kc.CurrentContext = ctxName
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("writing the kubeconfig of workload cluster %s: %w", cluster, err)
	}
	return data, nil
}

// Node describes the Node of one Machine.
type Node struct {
	// Name is the Node's name, the Machine's nodeRef.
	Name string
	// ProviderID is the Machine's spec.providerID.
	ProviderID string
	// ControlPlane nodes carry kubeadm's control-plane label and taint and
	// the control plane's static pods.
	ControlPlane bool
	// InternalIP is the node's address (loopback; nothing listens there).
	InternalIP string
	// Info is what the kubelet reports; the Machine controller copies it to
	// the Machine's status.nodeInfo.
	Info corev1.NodeSystemInfo
}

// controlPlaneLabel and the control plane taint are kubeadm's.
const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

// staticPods are the control plane components KubeadmControlPlane checks
// on each control-plane node (external etcd: no etcd pod).
var staticPods = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// AddNode registers a Ready Node (and, for a control-plane node, its
// static pods). A Node that already exists is left as it is.
func (s *Server) AddNode(ctx context.Context, n Node) error {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name,
			Labels: map[string]string{
				"kubernetes.io/hostname": n.Name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: n.ProviderID},
	}
	if n.ControlPlane {
		node.Labels[controlPlaneLabel] = ""
		node.Spec.Taints = []corev1.Taint{{Key: controlPlaneLabel, Effect: corev1.TaintEffectNoSchedule}}
	}
	if err := s.Client.Create(ctx, node); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating workload Node %s: %w", n.Name, err)
	}
	condition := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: status, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	status := corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{
			condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.InternalIP}, {Type: corev1.NodeHostName, Address: n.Name}},
		NodeInfo:  n.Info,
	}
	// A Machine controller that already watches the workload cluster may
	// label or annotate the new Node before its status is written, as it
	// may a real kubelet's: the kubelet's write is retried, not dropped.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		node.Status = status
		return s.Client.Status().Update(ctx, node)
	}); err != nil {
		return fmt.Errorf("writing the status of workload Node %s: %w", n.Name, err)
	}
	if !n.ControlPlane {
		return nil
	}
	if err := s.ensureKubeadmConfig(ctx, n.Info.KubeletVersion); err != nil {
		return err
	}
	for _, component := range staticPods {
		if err := s.addStaticPod(ctx, component, n, now); err != nil {
			return err
		}
	}
	return nil
}

// kubeadmConfigMap is the ConfigMap kubeadm init uploads to kube-system.
const kubeadmConfigMap = "kubeadm-config"

// ensureKubeadmConfig uploads the kubeadm-config ConfigMap, as kubeadm init
// does on the first control-plane node. KubeadmControlPlane reads it to
// learn that a control plane whose status says nothing (a copy made by a
// move carries no status) is initialized; without it the moved cluster
// would never be Available again. Every cluster shares this server, so
// one ConfigMap serves all.
func (s *Server) ensureKubeadmConfig(ctx context.Context, version string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: kubeadmConfigMap},
		Data: map[string]string{
			"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: " + version + "\n",
		},
	}
	if err := s.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("uploading the %s ConfigMap: %w", kubeadmConfigMap, err)
	}
	return nil
}

// addStaticPod creates the mirror pod of a control plane component, as the
// kubelet does for a static pod, Running and Ready.
func (s *Server) addStaticPod(ctx context.Context, component string, n Node, now metav1.Time) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceSystem,
			Name:      component + "-" + n.Name,
			Labels:    map[string]string{"component": component, "tier": "control-plane"},
		},
		Spec: corev1.PodSpec{
			NodeName:    n.Name,
			Containers:  []corev1.Container{{Name: component, Image: "registry.k8s.io/" + component + ":" + n.Info.KubeletVersion}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
	}
	if err := s.Client.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating static pod %s: %w", pod.Name, err)
	}
	ready := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{ready(corev1.PodScheduled), ready(corev1.PodInitialized), ready(corev1.ContainersReady), ready(corev1.PodReady)},
		HostIP:     n.InternalIP,
		StartTime:  &now,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: component, Ready: true, Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	if err := s.Client.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("writing the status of static pod %s: %w", pod.Name, err)
	}
	return nil
}
