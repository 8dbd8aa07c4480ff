package fleet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/desiredstate"

	"github.com/move-operator/move-operator/test/cloud"
	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/workload"
)

// Live is what a fleet managed by live controllers needs besides the
// objects: the cloud its machines run in and the workload API server its
// clusters are reached at. With Live, the fleet is created as the
// controllers would have left it, so that they find nothing to change:
//
//   - a VM in the cloud per LoopMachine and per MachinePool instance, named
//     and addressed as the loop provider names and records them;
//   - a Node per Machine (and pool instance) in the workload API server,
//     with the Machine's providerID and node info, and the control plane's
//     static pods;
//   - real certificates in the cluster Secrets (the workload API server's
//     CA) and an admin kubeconfig that reaches it, plus
//     <cluster>-apiserver-etcd-client: the control planes use external
//     etcd (see package workload for why);
//   - control-plane KubeadmConfigs as KubeadmControlPlane computes them
//     (desiredstate.ComputeDesiredKubeadmConfig), with the certificate
//     expiry annotation it would have recorded.
type Live struct {
	Cloud             *cloud.Cloud
	Workload          *workload.Server
	ManagementCluster string
}

// Paths kubeadm uses for an external etcd's certificates.
const (
	externalEtcdCAFile   = "/etc/kubernetes/pki/etcd/ca.crt"
	externalEtcdCertFile = "/etc/kubernetes/pki/apiserver-etcd-client.crt"
	externalEtcdKeyFile  = "/etc/kubernetes/pki/apiserver-etcd-client.key"
)

// kubeadmConfigSpec is the KubeadmControlPlane's (and its template's)
// kubeadm configuration in a live fleet.
func (l *Live) kubeadmConfigSpec() bootstrapv1.KubeadmConfigSpec {
	host, _ := l.Workload.Endpoint()
	return bootstrapv1.KubeadmConfigSpec{
		ClusterConfiguration: bootstrapv1.ClusterConfiguration{
			APIServer: bootstrapv1.APIServer{CertSANs: []string{host}},
			Etcd: bootstrapv1.Etcd{External: bootstrapv1.ExternalEtcd{
				Endpoints: []string{fmt.Sprintf("https://%s:2379", host)},
				CAFile:    externalEtcdCAFile,
				CertFile:  externalEtcdCertFile,
				KeyFile:   externalEtcdKeyFile,
			}},
		},
	}
}

// controlPlaneBootstrap is the KubeadmConfig spec KubeadmControlPlane
// gives a control-plane Machine.
func (l *Live) controlPlaneBootstrap(kcp *controlplanev1.KubeadmControlPlane, cluster *clusterv1.Cluster, join bool, name string) (bootstrapv1.KubeadmConfigSpec, error) {
	kc, err := desiredstate.ComputeDesiredKubeadmConfig(kcp, cluster, join, name, nil)
	if err != nil {
		return bootstrapv1.KubeadmConfigSpec{}, fmt.Errorf("computing the KubeadmConfig of control-plane Machine %s: %w", name, err)
	}
	return kc.Spec, nil
}

// recordCertificateExpiry annotates a control-plane KubeadmConfig with the
// expiry KubeadmControlPlane reads from the API server's certificate.
func (l *Live) recordCertificateExpiry(kc *bootstrapv1.KubeadmConfig) {
	if kc.Annotations == nil {
		kc.Annotations = map[string]string{}
	}
	kc.Annotations[clusterv1.MachineCertificatesExpiryDateAnnotation] = time.Now().Add(365 * 24 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
}

// createClusterSecrets creates the cluster Secrets with the workload API
// server's certificates and an admin kubeconfig for it.
func (l *Live) createClusterSecrets(ctx context.Context, w *writer, namespace, cluster string, labels map[string]string, owner []metav1.OwnerReference) error {
	certs := l.Workload.Certificates()
	kubeconfig, err := l.Workload.Kubeconfig(cluster)
	if err != nil {
		return err
	}
	pair := func(kp workload.KeyPair) map[string][]byte {
		return map[string][]byte{"tls.crt": kp.Cert, "tls.key": kp.Key}
	}
	secrets := map[string]map[string][]byte{
		"ca":                    pair(certs.CA),
		"etcd":                  pair(certs.EtcdCA),
		"sa":                    pair(certs.ServiceAccount),
		"proxy":                 pair(certs.FrontProxyCA),
		"apiserver-etcd-client": pair(certs.APIServerEtcdClient),
		"kubeconfig":            {"value": kubeconfig},
	}
	for _, purpose := range []string{"ca", "etcd", "sa", "proxy", "apiserver-etcd-client", "kubeconfig"} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster + "-" + purpose, Labels: labels, OwnerReferences: owner},
			Type:       clusterv1.ClusterSecretType,
			Data:       secrets[purpose],
		}
		if err := w.create(ctx, s, nil); err != nil {
			return err
		}
	}
	return nil
}

// provision creates the VM of a machine in the cloud, as the loop provider
// would have, and registers its Node in the workload API server.
func (l *Live) provision(ctx context.Context, namespace, ownerKind, owner, name, flavor, failureDomain, address string, controlPlane bool, info corev1.NodeSystemInfo) error {
	vmName := namespace + "/" + name
	caller := cloud.Caller{ManagementCluster: l.ManagementCluster, Kind: ownerKind, Namespace: namespace, Name: owner}
	if _, err := l.Cloud.CreateVM(ctx, caller, cloud.VMSpec{Name: vmName, Flavor: flavor, FailureDomain: failureDomain, Address: address}); err != nil {
		return fmt.Errorf("creating the VM of %s: %w", vmName, err)
	}
	if err := l.Workload.AddNode(ctx, workload.Node{
		Name:         name,
		ProviderID:   loopprovider.ProviderIDPrefix + vmName,
		ControlPlane: controlPlane,
		InternalIP:   address,
		Info:         info,
	}); err != nil {
		return fmt.Errorf("registering the Node of %s: %w", vmName, err)
	}
	return nil
}
