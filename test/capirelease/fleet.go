package capirelease

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/move-operator/move-operator/test/loopprovider"
	"github.com/move-operator/move-operator/test/workload"
)

// ActAsKubelets does, until ctx ends, what the machines of ns would do once
// the loop provider has created them: each registers its Node (by the
// Machine's name and providerID) in w, as its kubelet would after kubeadm
// ran; and it records on each control-plane KubeadmConfig the expiry of
// the API server's certificate, which KubeadmControlPlane reads from the
// node through a kubelet (none runs here).
func ActAsKubelets(ctx context.Context, cl client.Client, w *workload.Server, ns string, logf func(format string, args ...any)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		machines := &unstructured.UnstructuredList{}
		machines.SetAPIVersion("cluster.x-k8s.io/v1beta1")
		machines.SetKind("MachineList")
		if err := cl.List(ctx, machines, client.InNamespace(ns)); err != nil {
			continue
		}
		for _, m := range machines.Items {
			providerID, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
			if providerID == "" {
				continue
			}
			_, controlPlane := m.GetLabels()["cluster.x-k8s.io/control-plane"]
			version, _, _ := unstructured.NestedString(m.Object, "spec", "version")
			infra, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
			address := "127.0.0.1"
			lm := &unstructured.Unstructured{}
			lm.SetGroupVersionKind(loopprovider.GroupVersion.WithKind(loopprovider.MachineKind))
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: infra}, lm); err == nil {
				addrs, _, _ := unstructured.NestedSlice(lm.Object, "status", "addresses")
				for _, a := range addrs {
					if am, ok := a.(map[string]any); ok && am["type"] == "InternalIP" {
						address, _ = am["address"].(string)
					}
				}
			}
			if err := w.AddNode(ctx, workload.Node{
				Name: m.GetName(), ProviderID: providerID, ControlPlane: controlPlane, InternalIP: address,
				Info: corev1.NodeSystemInfo{KubeletVersion: version, OperatingSystem: "linux", Architecture: "amd64"},
			}); err != nil && ctx.Err() == nil {
				logf("registering the Node of Machine %s: %v", m.GetName(), err)
			}
			if !controlPlane {
				continue
			}
			configName, _, _ := unstructured.NestedString(m.Object, "spec", "bootstrap", "configRef", "name")
			kc := &unstructured.Unstructured{}
			kc.SetAPIVersion("bootstrap.cluster.x-k8s.io/v1beta1")
			kc.SetKind("KubeadmConfig")
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: configName}, kc); err != nil {
				continue
			}
			const expiryAnnotation = "machine.cluster.x-k8s.io/certificates-expiry"
			if _, ok := kc.GetAnnotations()[expiryAnnotation]; ok {
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, expiryAnnotation,
				time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC3339))
			if err := cl.Patch(ctx, kc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				logf("recording the certificate expiry of KubeadmConfig %s: %v", configName, err)
			}
		}
	}
}

// CreateFleet creates Fleet's objects through c, in order. A Cluster of a
// ClusterClass is refused by the release's webhook until its topology
// controller has reconciled the ClusterClass: that create is tried again
// for up to a minute.
func CreateFleet(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		deadline := time.Now().Add(time.Minute)
		for {
			err := c.Create(ctx, o)
			if err == nil {
				break
			}
			if o.GetKind() != "Cluster" || time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("creating %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

// Shape is how a workload cluster of Fleet is defined.
type Shape string

const (
	// Classic: every object created directly.
	Classic Shape = "classic"
	// Topology: a Cluster of a ClusterClass (in the same namespace, named
	// after the cluster), whose KubeadmControlPlane, MachineDeployment and
	// their templates v1.10's topology controller makes.
	Topology Shape = "topology"
)

// Fleet returns the objects of a v1beta1 Cluster on the loop provider,
// defined as shape says, whose control plane is w: its certificate
// authorities and admin kubeconfig are w's (as kubeadm init would have
// made them), its control plane uses an external etcd (see package
// workload for why), one control-plane replica and one worker, no Machine
// yet. Templates come before what refers to them.
func Fleet(w *workload.Server, ns, name string, shape Shape) ([]*unstructured.Unstructured, error) {
	host, port := w.Endpoint()
	var manifests string
	switch shape {
	case Classic:
		manifests = fmt.Sprintf(classicManifests, name, host, port, controlPlaneKubeadm(host))
	case Topology:
		manifests = fmt.Sprintf(topologyManifests, name, host, port, controlPlaneKubeadm(host))
	default:
		return nil, fmt.Errorf("no fleet of shape %q", shape)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(manifests, "\n---\n") {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			return nil, fmt.Errorf("parsing %q: %w", doc, err)
		}
		o.SetNamespace(ns)
		objs = append(objs, o)
	}
	certs := w.Certificates()
	kubeconfig, err := w.Kubeconfig(name)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of workload cluster %s: %w", name, err)
	}
	pair := func(kp workload.KeyPair) map[string]any {
		return map[string]any{"tls.crt": kp.Cert, "tls.key": kp.Key}
	}
	for purpose, data := range map[string]map[string]any{
		"ca": pair(certs.CA), "etcd": pair(certs.EtcdCA), "sa": pair(certs.ServiceAccount), "proxy": pair(certs.FrontProxyCA),
		"apiserver-etcd-client": pair(certs.APIServerEtcdClient), "kubeconfig": {"value": kubeconfig},
	} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + purpose, Labels: map[string]string{"cluster.x-k8s.io/cluster-name": name}},
			Type:       "cluster.x-k8s.io/secret",
			Data:       map[string][]byte{},
		}
		for k, v := range data {
			s.Data[k] = v.([]byte)
		}
		s.APIVersion, s.Kind = "v1", "Secret"
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			return nil, err
		}
		objs = append([]*unstructured.Unstructured{{Object: m}}, objs...)
	}
	return objs, nil
}

// controlPlaneKubeadm is the kubeadmConfigSpec of a Fleet's control plane,
// as a YAML flow mapping for the workload API server at host. v1.10's
// KubeadmControlPlane compares a Machine's KubeadmConfig with its own and
// rolls the Machine out when they differ: it needs an initConfiguration,
// as the bootstrap controller fills the Machine's in (Cluster API's own
// templates always give one); and no joinConfiguration of its own for one
// replica, as the bootstrap controller may give the first Machine an empty
// one first. The control plane uses an external etcd (see package
// workload).
func controlPlaneKubeadm(host string) string {
	return fmt.Sprintf(`{initConfiguration: {nodeRegistration: {kubeletExtraArgs: {node-labels: role=control-plane}}}, `+
		`clusterConfiguration: {apiServer: {certSANs: [%[1]s]}, etcd: {external: {endpoints: ["https://%[1]s:2379"], `+
		`caFile: /etc/kubernetes/pki/etcd/ca.crt, certFile: /etc/kubernetes/pki/apiserver-etcd-client.crt, `+
		`keyFile: /etc/kubernetes/pki/apiserver-etcd-client.key}}}}`, host)
}

// The manifests of Fleet's shapes, after machineTemplates: %[1]s is the
// cluster's name, %[2]s and %[3]d the workload API server's host and port,
// %[4]s the control plane's kubeadmConfigSpec (controlPlaneKubeadm).
const (
	machineTemplates = `
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: LoopMachineTemplate
metadata: {name: %[1]s-cp}
spec: {template: {spec: {flavor: medium}}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: LoopMachineTemplate
metadata: {name: %[1]s-md}
spec: {template: {spec: {flavor: small}}}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfigTemplate
metadata: {name: %[1]s-md}
spec: {template: {spec: {joinConfiguration: {nodeRegistration: {kubeletExtraArgs: {node-labels: pool=md}}}}}}
---`

	classicManifests = machineTemplates + `
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: LoopCluster
metadata: {name: %[1]s}
spec: {}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata: {name: %[1]s-cp}
spec:
  replicas: 1
  version: v1.32.0
  machineTemplate:
    infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: LoopMachineTemplate, name: %[1]s-cp}
  kubeadmConfigSpec: %[4]s
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: %[1]s}
spec:
  clusterNetwork: {pods: {cidrBlocks: [192.168.0.0/16]}}
  controlPlaneEndpoint: {host: %[2]s, port: %[3]d}
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: LoopCluster, name: %[1]s}
  controlPlaneRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta1, kind: KubeadmControlPlane, name: %[1]s-cp}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: %[1]s-md}
spec:
  clusterName: %[1]s
  replicas: 1
  selector: {}
  template:
    spec:
      clusterName: %[1]s
      version: v1.32.0
      bootstrap:
        configRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta1, kind: KubeadmConfigTemplate, name: %[1]s-md}
      infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: LoopMachineTemplate, name: %[1]s-md}
`

	topologyManifests = machineTemplates + `
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: LoopClusterTemplate
metadata: {name: %[1]s}
spec: {template: {spec: {}}}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlaneTemplate
metadata: {name: %[1]s-cp}
spec: {template: {spec: {kubeadmConfigSpec: %[4]s}}}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: ClusterClass
metadata: {name: %[1]s}
spec:
  infrastructure: {ref: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: LoopClusterTemplate, name: %[1]s}}
  controlPlane:
    ref: {apiVersion: controlplane.cluster.x-k8s.io/v1beta1, kind: KubeadmControlPlaneTemplate, name: %[1]s-cp}
    machineInfrastructure: {ref: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: LoopMachineTemplate, name: %[1]s-cp}}
  workers:
    machineDeployments:
    - class: default-worker
      template:
        bootstrap: {ref: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta1, kind: KubeadmConfigTemplate, name: %[1]s-md}}
        infrastructure: {ref: {apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1, kind: LoopMachineTemplate, name: %[1]s-md}}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: %[1]s}
spec:
  clusterNetwork: {pods: {cidrBlocks: [192.168.0.0/16]}}
  controlPlaneEndpoint: {host: %[2]s, port: %[3]d}
  topology:
    class: %[1]s
    version: v1.32.0
    controlPlane: {replicas: 1}
    workers:
      machineDeployments:
      - {class: default-worker, name: md-0, replicas: 1}
`
)
