package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/test/capiprovider"
	"github.com/move-operator/move-operator/test/hostprovider"
	"github.com/move-operator/move-operator/test/loopprovider"
)

// Finalizers of the loop provider's kinds, as a provider's controllers add them.
const (
	loopClusterFinalizer     = loopprovider.ClusterFinalizer
	loopMachineFinalizer     = loopprovider.MachineFinalizer
	loopMachinePoolFinalizer = loopprovider.MachinePoolFinalizer
	// Finalizers of the IPAM in-cluster provider.
	ipClaimFinalizer   = "ipam.cluster.x-k8s.io/ReleaseAddress"
	ipAddressFinalizer = "ipam.cluster.x-k8s.io/ProtectAddress"
	// The IPAM pool kind the claims point at. The pool belongs to an IPAM
	// provider that the management setup does not install; nothing resolves it.
	ipPoolKind = "InClusterIPPool"
)

// clusterBuilder creates the objects of one workload cluster.
type clusterBuilder struct {
	w        *writer
	opts     Options
	wc       WorkloadCluster
	index    int
	class    *classRefs
	identity string
	crs      *crsInfo

	cluster *clusterv1.Cluster
	kcp     *controlplanev1.KubeadmControlPlane
	// cpBootstrap, if set, gives the i-th control-plane Machine's
	// KubeadmConfig spec.
	cpBootstrap func(i int, name string) (bootstrapv1.KubeadmConfigSpec, error)
}

func (b *clusterBuilder) topology() bool { return b.class != nil }

// name returns a generated name: the fixed one of a classic cluster, or one
// with the random-looking suffix the topology controller appends.
func (b *clusterBuilder) name(base string) string {
	if !b.topology() {
		return base
	}
	return base + "-" + suffix(b.wc.Namespace+"/"+base)
}

// labels returns the labels every object of the cluster carries, plus extra.
func (b *clusterBuilder) labels(extra ...string) map[string]string {
	l := map[string]string{clusterv1.ClusterNameLabel: b.wc.Name}
	if b.topology() {
		l[clusterv1.ClusterTopologyOwnedLabel] = ""
	}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// cloned marks an object cloned from a template, as the controllers do.
func cloned(obj client.Object, templateName, templateGroupKind string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[clusterv1.TemplateClonedFromNameAnnotation] = templateName
	a[clusterv1.TemplateClonedFromGroupKindAnnotation] = templateGroupKind
	obj.SetAnnotations(a)
}

// endpoint is the workload cluster's API address: the shared workload API
// server of a live fleet, or a loopback address never dialled.
func (b *clusterBuilder) endpoint() string {
	if b.opts.Live != nil {
		host, _ := b.opts.Live.Workload.Endpoint()
		return host
	}
	return fmt.Sprintf("127.99.%d.%d", b.index/250, b.index%250+1)
}

func (b *clusterBuilder) endpointPort() int32 {
	if b.opts.Live != nil {
		_, port := b.opts.Live.Workload.Endpoint()
		return port
	}
	return 6443
}

func (b *clusterBuilder) build(ctx context.Context) error {
	steps := []func(context.Context) error{
		b.createCluster,
		b.createInfrastructureCluster,
		b.createControlPlane,
		b.createWorkers,
		b.createMachinePool,
		b.createMachineHealthCheck,
		b.createResourceSetBinding,
		b.unpause,
		b.setClusterStatus,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

var (
	loopGroup         = capiprovider.LoopGroupVersion.Group
	bootstrapGroup    = bootstrapv1.GroupVersion.Group
	controlPlaneGroup = controlplanev1.GroupVersion.Group
)

func (b *clusterBuilder) createCluster(ctx context.Context) error {
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  b.wc.Namespace,
			Name:       b.wc.Name,
			Labels:     map[string]string{CNILabel: "loop"},
			Finalizers: []string{clusterv1.ClusterFinalizer},
		},
		Spec: clusterv1.ClusterSpec{
			ClusterNetwork: clusterv1.ClusterNetwork{
				Pods:     clusterv1.NetworkRanges{CIDRBlocks: []string{"192.168.0.0/16"}},
				Services: clusterv1.NetworkRanges{CIDRBlocks: []string{"10.128.0.0/12"}},
			},
			ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: b.endpoint(), Port: b.endpointPort()},
			InfrastructureRef:    clusterv1.ContractVersionedObjectReference{APIGroup: loopGroup, Kind: capiprovider.LoopClusterKind, Name: b.name(b.wc.Name)},
			ControlPlaneRef:      clusterv1.ContractVersionedObjectReference{APIGroup: controlPlaneGroup, Kind: "KubeadmControlPlane", Name: b.name(b.controlPlaneBase())},
		},
	}
	if b.opts.Live != nil {
		// Created paused, as a move creates clusters in its target, so that
		// no controller acts on a half-made cluster; unpaused once complete.
		c.Spec.Paused = ptr.To(true)
	}
	if b.topology() {
		classRef := clusterv1.ClusterClassRef{Name: b.class.name}
		if b.class.namespace != b.wc.Namespace {
			classRef.Namespace = b.class.namespace
		}
		c.Spec.Topology = clusterv1.Topology{
			ClassRef:     classRef,
			Version:      b.opts.KubernetesVersion,
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To(int32(b.opts.ControlPlaneReplicas))},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{
				Class: workerClass, Name: "md-0", Replicas: ptr.To(int32(*b.opts.Workers)),
			}}},
		}
	}
	b.cluster = c
	return b.w.create(ctx, c, nil)
}

func (b *clusterBuilder) controlPlaneBase() string {
	if b.topology() {
		return b.wc.Name
	}
	return b.wc.Name + "-control-plane"
}

func (b *clusterBuilder) createInfrastructureCluster(ctx context.Context) error {
	lc := newLoop(capiprovider.LoopClusterKind, b.wc.Namespace, b.cluster.Spec.InfrastructureRef.Name)
	lc.SetLabels(b.labels())
	lc.SetFinalizers([]string{loopClusterFinalizer})
	lc.SetOwnerReferences([]metav1.OwnerReference{b.w.ownerRef(b.cluster, true)})
	if b.topology() {
		cloned(lc, ClusterClassName+"-cluster", capiprovider.LoopClusterTemplateKind+"."+loopGroup)
	}
	setNested(lc, map[string]any{
		"controlPlaneEndpoint": map[string]any{"host": b.endpoint(), "port": int64(b.endpointPort())},
		"identityRef":          map[string]any{"name": b.identity},
		"failureDomains":       []any{"zone-a", "zone-b"},
	}, "spec")
	return b.w.create(ctx, lc, func() {
		setNested(lc, map[string]any{
			"initialization": map[string]any{"provisioned": true},
			"failureDomains": []any{
				map[string]any{"name": "zone-a", "controlPlane": true},
				map[string]any{"name": "zone-b", "controlPlane": false},
			},
			"conditions": conditionsJSON(conditions(lc.GetGeneration(), isTrue(clusterv1.ReadyCondition, clusterv1.ReadyReason))),
		}, "status")
	})
}

// loopMachineTemplate creates a LoopMachineTemplate owned by the Cluster, for
// a MachineDeployment or the KubeadmControlPlane.
func (b *clusterBuilder) loopMachineTemplate(ctx context.Context, name, flavor, classTemplate string, extraLabels ...string) error {
	t := newLoop(capiprovider.LoopMachineTemplateKind, b.wc.Namespace, name)
	t.SetLabels(b.labels(extraLabels...))
	t.SetOwnerReferences([]metav1.OwnerReference{b.w.ownerRef(b.cluster, false)})
	if b.topology() {
		cloned(t, classTemplate, capiprovider.LoopMachineTemplateKind+"."+loopGroup)
	}
	setNested(t, flavor, "spec", "template", "spec", "flavor")
	return b.w.create(ctx, t, nil)
}

func (b *clusterBuilder) createControlPlane(ctx context.Context) error {
	infraTemplate := b.name(b.wc.Name + "-control-plane")
	if b.topology() {
		infraTemplate = b.name(b.wc.Name + "-control-plane-machines")
	}
	if err := b.loopMachineTemplate(ctx, infraTemplate, "large", ClusterClassName+"-control-plane"); err != nil {
		return err
	}
	if err := b.createKubeadmControlPlane(ctx, infraTemplate); err != nil {
		return err
	}
	if err := b.createClusterSecrets(ctx); err != nil {
		return err
	}
	if b.opts.Live != nil {
		// The KubeadmConfigs of control-plane Machines are what
		// KubeadmControlPlane computes from its spec: the first one for
		// kubeadm init, the others for join.
		kcp := b.kcp
		b.cpBootstrap = func(i int, name string) (bootstrapv1.KubeadmConfigSpec, error) {
			return b.opts.Live.controlPlaneBootstrap(kcp, b.cluster, i > 0, name)
		}
	}
	if err := b.createControlPlaneMachines(ctx, infraTemplate); err != nil {
		return err
	}
	return b.setControlPlaneStatus(ctx)
}

// createKubeadmControlPlane creates the cluster's KubeadmControlPlane, whose
// Machines are cloned from infraTemplate.
func (b *clusterBuilder) createKubeadmControlPlane(ctx context.Context, infraTemplate string) error {
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            b.cluster.Spec.ControlPlaneRef.Name,
			Labels:          b.labels(),
			Finalizers:      []string{controlplanev1.KubeadmControlPlaneFinalizer},
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(b.cluster, true)},
		},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To(int32(b.opts.ControlPlaneReplicas)),
			Version:  b.opts.KubernetesVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: loopGroup, Kind: capiprovider.LoopMachineTemplateKind, Name: infraTemplate},
				},
			},
			KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{
				ClusterConfiguration: bootstrapv1.ClusterConfiguration{
					APIServer: bootstrapv1.APIServer{CertSANs: []string{b.endpoint()}},
				},
			},
		},
	}
	if b.topology() {
		cloned(kcp, ClusterClassName+"-control-plane", "KubeadmControlPlaneTemplate."+controlPlaneGroup)
	}
	if b.opts.Live != nil {
		kcp.Spec.KubeadmConfigSpec = b.opts.Live.kubeadmConfigSpec()
		if b.topology() {
			// The topology controller labels the control plane's machine
			// template as the control plane itself.
			kcp.Spec.MachineTemplate.ObjectMeta.Labels = b.labels()
		}
	}
	b.kcp = kcp
	return b.w.create(ctx, kcp, nil)
}

// createControlPlaneMachines creates the KubeadmControlPlane's Machines, the
// first of them claiming an IP address.
func (b *clusterBuilder) createControlPlaneMachines(ctx context.Context, infraTemplate string) error {
	kcp := b.kcp
	var machines []string
	for i := range b.opts.ControlPlaneReplicas {
		name := kcp.Name + "-" + suffix(fmt.Sprintf("%s/%s/cp/%d", b.wc.Namespace, kcp.Name, i))
		machines = append(machines, name)
		bootstrap := bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{ControlPlane: &bootstrapv1.JoinControlPlane{}}}
		if b.cpBootstrap != nil {
			var err error
			if bootstrap, err = b.cpBootstrap(i, name); err != nil {
				return err
			}
		}
		err := b.createMachine(ctx, machineParams{
			name:  name,
			owner: kcp,
			labels: b.labels(
				clusterv1.MachineControlPlaneLabel, "",
				clusterv1.MachineControlPlaneNameLabel, kcp.Name),
			controlPlane:  true,
			bootstrap:     bootstrap,
			infraTemplate: infraTemplate,
			flavor:        "large",
			failureDomain: "zone-a",
			claimAddress:  i == 0,
		})
		if err != nil {
			return err
		}
	}
	b.wc.Machines = append(b.wc.Machines, machines...)
	return nil
}

// setControlPlaneStatus writes the status of a KubeadmControlPlane whose
// Machines are all up to date and ready.
func (b *clusterBuilder) setControlPlaneStatus(ctx context.Context) error {
	kcp := b.kcp
	n := int32(b.opts.ControlPlaneReplicas)
	kcp.Status = controlplanev1.KubeadmControlPlaneStatus{
		Initialization:    controlplanev1.KubeadmControlPlaneInitializationStatus{ControlPlaneInitialized: ptr.To(true)},
		Selector:          clusterv1.ClusterNameLabel + "=" + b.wc.Name + "," + clusterv1.MachineControlPlaneLabel,
		Replicas:          &n,
		ReadyReplicas:     &n,
		AvailableReplicas: &n,
		UpToDateReplicas:  &n,
		Versions:          []clusterv1.StatusVersion{{Version: b.opts.KubernetesVersion, Replicas: n}},
		// Backfilled by KubeadmControlPlane for older clients until removed.
		Version:            b.opts.KubernetesVersion, //nolint:staticcheck // as the controller sets it
		ObservedGeneration: kcp.Generation,
		Conditions: steadyState(kcp.Generation,
			isTrue(controlplanev1.KubeadmControlPlaneAvailableCondition, clusterv1.AvailableReason),
			isTrue(controlplanev1.KubeadmControlPlaneInitializedCondition, "Initialized"),
			isTrue(controlplanev1.KubeadmControlPlaneCertificatesAvailableCondition, "Available"),
			isTrue(controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition, "Healthy"),
			isTrue(controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition, "Healthy"),
			isTrue(controlplanev1.KubeadmControlPlaneMachinesReadyCondition, clusterv1.ReadyReason),
			isTrue(controlplanev1.KubeadmControlPlaneMachinesUpToDateCondition, clusterv1.UpToDateReason),
			isFalse(controlplanev1.KubeadmControlPlaneRollingOutCondition, clusterv1.NotRollingOutReason),
			isFalse(controlplanev1.KubeadmControlPlaneScalingUpCondition, clusterv1.NotScalingUpReason),
			isFalse(controlplanev1.KubeadmControlPlaneScalingDownCondition, clusterv1.NotScalingDownReason),
			isFalse(controlplanev1.KubeadmControlPlaneRemediatingCondition, clusterv1.NotRemediatingReason),
			notDeleting()),
	}
	return b.w.setStatus(ctx, kcp)
}

// createClusterSecrets creates the Secrets KubeadmControlPlane generates for
// a cluster: certificates and the admin kubeconfig.
func (b *clusterBuilder) createClusterSecrets(ctx context.Context) error {
	owner := []metav1.OwnerReference{b.w.ownerRef(b.kcp, true)}
	if b.opts.Live != nil {
		return b.opts.Live.createClusterSecrets(ctx, b.w, b.wc.Namespace, b.wc.Name, b.labels(), owner)
	}
	pem := func(kind string) []byte {
		return []byte("-----BEGIN " + kind + "-----\n" + suffix(b.wc.Name+kind) + "loopfixture\n-----END " + kind + "-----\n")
	}
	for _, purpose := range []string{"ca", "etcd", "sa", "proxy"} {
		data := map[string][]byte{"tls.crt": pem("CERTIFICATE"), "tls.key": pem("RSA PRIVATE KEY")}
		if purpose == "sa" {
			data = map[string][]byte{"tls.crt": pem("PUBLIC KEY"), "tls.key": pem("RSA PRIVATE KEY")}
		}
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: b.wc.Namespace, Name: b.wc.Name + "-" + purpose, Labels: b.labels(), OwnerReferences: owner},
			Type:       clusterv1.ClusterSecretType,
			Data:       data,
		}
		if err := b.w.create(ctx, s, nil); err != nil {
			return err
		}
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: https://%[2]s:6443
contexts:
- name: %[1]s-admin@%[1]s
  context:
    cluster: %[1]s
    user: %[1]s-admin
current-context: %[1]s-admin@%[1]s
users:
- name: %[1]s-admin
  user:
    client-certificate-data: bG9vcA==
    client-key-data: bG9vcA==
`, b.wc.Name, b.endpoint())
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.wc.Namespace, Name: b.wc.Name + "-kubeconfig", Labels: b.labels(), OwnerReferences: owner},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": []byte(kubeconfig)},
	}
	return b.w.create(ctx, s, nil)
}

// machineParams describe one Machine and the objects that come with it.
type machineParams struct {
	name   string
	owner  client.Object
	labels map[string]string
	// bootstrap is the KubeadmConfig spec; bootstrapTemplate, if set, the
	// KubeadmConfigTemplate it was cloned from.
	bootstrap         bootstrapv1.KubeadmConfigSpec
	bootstrapTemplate string
	infraTemplate     string
	flavor            string
	failureDomain     string
	claimAddress      bool
	controlPlane      bool
}

// createMachine creates a Machine with its KubeadmConfig, bootstrap data
// Secret and LoopMachine, all with the statuses of a running node.
func (b *clusterBuilder) createMachine(ctx context.Context, p machineParams) error {
	providerID := capiprovider.LoopProviderIDPrefix + b.wc.Namespace + "/" + p.name
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            p.name,
			Labels:          p.labels,
			Finalizers:      []string{clusterv1.MachineFinalizer},
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(p.owner, true)},
		},
		Spec: clusterv1.MachineSpec{
			ClusterName: b.wc.Name,
			Bootstrap: clusterv1.Bootstrap{
				ConfigRef:      clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapGroup, Kind: "KubeadmConfig", Name: p.name},
				DataSecretName: ptr.To(p.name),
			},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: loopGroup, Kind: capiprovider.LoopMachineKind, Name: p.name},
			Version:           b.opts.KubernetesVersion,
			ProviderID:        providerID,
			FailureDomain:     p.failureDomain,
		},
	}
	if err := b.w.create(ctx, m, nil); err != nil {
		return err
	}
	machineOwner := []metav1.OwnerReference{b.w.ownerRef(m, true)}

	kc := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.wc.Namespace, Name: p.name, Labels: p.labels, OwnerReferences: machineOwner},
		Spec:       p.bootstrap,
	}
	if p.bootstrapTemplate != "" {
		cloned(kc, p.bootstrapTemplate, "KubeadmConfigTemplate."+bootstrapGroup)
	}
	if p.controlPlane && b.opts.Live != nil {
		b.opts.Live.recordCertificateExpiry(kc)
	}
	if err := b.createBootstrapConfig(ctx, kc); err != nil {
		return err
	}

	address := b.machineAddress(p.name)
	lm, err := b.createLoopMachine(ctx, p, providerID, address, machineOwner)
	if err != nil {
		return err
	}
	if p.claimAddress {
		if err := b.createAddressClaim(ctx, lm, address); err != nil {
			return err
		}
	}
	if b.opts.Live != nil {
		if err := b.opts.Live.provision(ctx, b.wc.Namespace, capiprovider.LoopMachineKind, p.name, p.name, p.flavor, p.failureDomain, address, p.controlPlane, b.nodeInfo(p.name)); err != nil {
			return err
		}
	}
	return b.setMachineStatus(ctx, m, p, address)
}

// createLoopMachine creates the LoopMachine of a Machine, provisioned at
// address.
func (b *clusterBuilder) createLoopMachine(ctx context.Context, p machineParams, providerID, address string, owner []metav1.OwnerReference) (*unstructured.Unstructured, error) {
	lm := newLoop(capiprovider.LoopMachineKind, b.wc.Namespace, p.name)
	lm.SetLabels(p.labels)
	lm.SetFinalizers([]string{loopMachineFinalizer})
	lm.SetOwnerReferences(owner)
	cloned(lm, p.infraTemplate, capiprovider.LoopMachineTemplateKind+"."+loopGroup)
	setNested(lm, map[string]any{"providerID": providerID, "flavor": p.flavor, "failureDomain": p.failureDomain}, "spec")
	err := b.w.create(ctx, lm, func() {
		setNested(lm, map[string]any{
			"initialization": map[string]any{"provisioned": true},
			"addresses": []any{
				map[string]any{"type": "InternalIP", "address": address},
				map[string]any{"type": "Hostname", "address": p.name},
			},
			"conditions": conditionsJSON(conditions(lm.GetGeneration(), isTrue(clusterv1.ReadyCondition, clusterv1.ReadyReason))),
		}, "status")
	})
	return lm, err
}

// setMachineStatus writes the status of a Machine whose node runs.
func (b *clusterBuilder) setMachineStatus(ctx context.Context, m *clusterv1.Machine, p machineParams, address string) error {
	m.Status = clusterv1.MachineStatus{
		Initialization: clusterv1.MachineInitializationStatus{InfrastructureProvisioned: ptr.To(true), BootstrapDataSecretCreated: ptr.To(true)},
		NodeRef:        clusterv1.MachineNodeReference{Name: p.name},
		NodeInfo:       ptr.To(b.nodeInfo(p.name)),
		LastUpdated:    metav1.NewTime(time.Now().Truncate(time.Second)),
		Addresses: clusterv1.MachineAddresses{
			{Type: clusterv1.MachineInternalIP, Address: address},
			{Type: clusterv1.MachineHostName, Address: p.name},
		},
		FailureDomain:      p.failureDomain,
		Phase:              string(clusterv1.MachinePhaseRunning),
		ObservedGeneration: m.Generation,
		Conditions: steadyState(m.Generation,
			isTrue(clusterv1.MachineAvailableCondition, clusterv1.AvailableReason),
			isTrue(clusterv1.MachineReadyCondition, clusterv1.ReadyReason),
			isTrue(clusterv1.MachineUpToDateCondition, clusterv1.UpToDateReason),
			isTrue(clusterv1.MachineBootstrapConfigReadyCondition, clusterv1.ReadyReason),
			isTrue(clusterv1.MachineInfrastructureReadyCondition, clusterv1.ReadyReason),
			isTrue(clusterv1.MachineNodeReadyCondition, "NodeReady"),
			isTrue(clusterv1.MachineNodeHealthyCondition, "NodeHealthy"),
			notDeleting()),
	}
	return b.w.setStatus(ctx, m)
}

// nodeInfo is what the kubelet of a simulated node reports.
func (b *clusterBuilder) nodeInfo(name string) corev1.NodeSystemInfo {
	return corev1.NodeSystemInfo{
		KubeletVersion: b.opts.KubernetesVersion, ContainerRuntimeVersion: "containerd://2.1.4",
		OperatingSystem: "linux", Architecture: "amd64", OSImage: "Loop Linux", KernelVersion: "6.12.0-loop",
		MachineID: suffix(name + "/machine-id"), SystemUUID: suffix(name + "/uuid"), BootID: suffix(name + "/boot"),
	}
}

// machineAddress is a loopback address for a simulated machine.
func (b *clusterBuilder) machineAddress(name string) string {
	h := suffix(name)
	return fmt.Sprintf("127.100.%d.%d", b.index%250, 2+int(h[0])%250)
}

// createBootstrapConfig creates a KubeadmConfig and the bootstrap data Secret
// it produced, owned by it.
func (b *clusterBuilder) createBootstrapConfig(ctx context.Context, kc *bootstrapv1.KubeadmConfig) error {
	if err := b.w.create(ctx, kc, func() {
		kc.Status = bootstrapv1.KubeadmConfigStatus{
			Initialization:     bootstrapv1.KubeadmConfigInitializationStatus{DataSecretCreated: ptr.To(true)},
			DataSecretName:     kc.Name,
			ObservedGeneration: kc.Generation,
			Conditions: steadyState(kc.Generation,
				isTrue(bootstrapv1.KubeadmConfigReadyCondition, clusterv1.ReadyReason),
				isTrue(bootstrapv1.KubeadmConfigDataSecretAvailableCondition, "Available"),
				isTrue(bootstrapv1.KubeadmConfigCertificatesAvailableCondition, "Available")),
		}
	}); err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       kc.Namespace,
			Name:            kc.Name,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: b.wc.Name},
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(kc, true)},
		},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{
			"value":  []byte("#cloud-config\nruncmd:\n- echo loop machine " + kc.Name + "\n"),
			"format": []byte(bootstrapv1.CloudConfig),
		},
	}
	return b.w.create(ctx, secret, nil)
}

// createAddressClaim creates the IPAddressClaim a LoopMachine makes for its
// address and the IPAddress an IPAM provider allocates for it.
func (b *clusterBuilder) createAddressClaim(ctx context.Context, lm *unstructured.Unstructured, address string) error {
	pool := ipamv1.IPPoolReference{APIGroup: ipamv1.GroupVersion.Group, Kind: ipPoolKind, Name: b.wc.Namespace + "-loopback"}
	name := lm.GetName() + "-0"
	claim := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            name,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: b.wc.Name},
			Finalizers:      []string{ipClaimFinalizer},
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(lm, true)},
		},
		Spec: ipamv1.IPAddressClaimSpec{ClusterName: b.wc.Name, PoolRef: pool},
	}
	if err := b.w.create(ctx, claim, nil); err != nil {
		return err
	}
	ip := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            name,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: b.wc.Name},
			Finalizers:      []string{ipAddressFinalizer},
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(claim, true)},
		},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  pool,
			Address:  address,
			Prefix:   ptr.To[int32](24),
			Gateway:  address[:strings.LastIndex(address, ".")] + ".1",
		},
	}
	if err := b.w.create(ctx, ip, nil); err != nil {
		return err
	}
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: ip.Name}
	claim.Status.Conditions = conditions(claim.Generation, isTrue(clusterv1.ReadyCondition, clusterv1.ReadyReason))
	return b.w.setStatus(ctx, claim)
}

// createWorkers creates the cluster's MachineDeployment with its templates,
// MachineSet and Machines, all with the statuses of running workers.
func (b *clusterBuilder) createWorkers(ctx context.Context) error {
	mdName := b.name(b.wc.Name + "-md-0")
	bootstrapTemplate, err := b.createWorkerTemplates(ctx, mdName)
	if err != nil {
		return err
	}
	workers := int32(*b.opts.Workers)
	template := b.workerTemplate(mdName, bootstrapTemplate)
	md, err := b.createMachineDeployment(ctx, mdName, template, workers)
	if err != nil {
		return err
	}
	ms, msTemplate, err := b.createMachineSet(ctx, md, template, workers)
	if err != nil {
		return err
	}
	if err := b.createWorkerMachines(ctx, ms, msTemplate.Labels, bootstrapTemplate, mdName, workers); err != nil {
		return err
	}
	return b.setWorkerStatuses(ctx, md, ms, workers)
}

// createWorkerTemplates creates the KubeadmConfigTemplate and the
// LoopMachineTemplate of the MachineDeployment mdName, and returns the name
// of the first.
func (b *clusterBuilder) createWorkerTemplates(ctx context.Context, mdName string) (string, error) {
	bootstrapTemplate := &bootstrapv1.KubeadmConfigTemplate{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            mdName,
			Labels:          b.labels(),
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(b.cluster, false)},
		},
	}
	classTemplate := ClusterClassName + "-" + workerClass
	if b.topology() {
		cloned(bootstrapTemplate, classTemplate, "KubeadmConfigTemplate."+bootstrapGroup)
		bootstrapTemplate.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] = "md-0"
	}
	if err := b.w.create(ctx, bootstrapTemplate, nil); err != nil {
		return "", err
	}
	var topologyLabels []string
	if b.topology() {
		topologyLabels = []string{clusterv1.ClusterTopologyMachineDeploymentNameLabel, "md-0"}
	}
	if err := b.loopMachineTemplate(ctx, mdName, "small", classTemplate, topologyLabels...); err != nil {
		return "", err
	}
	return bootstrapTemplate.Name, nil
}

// workerTemplate is the Machine template of the MachineDeployment mdName.
func (b *clusterBuilder) workerTemplate(mdName, bootstrapTemplate string) clusterv1.MachineTemplateSpec {
	return clusterv1.MachineTemplateSpec{
		Spec: clusterv1.MachineSpec{
			ClusterName: b.wc.Name,
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapGroup, Kind: "KubeadmConfigTemplate", Name: bootstrapTemplate}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: loopGroup, Kind: capiprovider.LoopMachineTemplateKind, Name: mdName},
			Version:           b.opts.KubernetesVersion,
			FailureDomain:     "zone-b",
		},
	}
}

// createMachineDeployment creates the MachineDeployment mdName of workers
// Machines.
func (b *clusterBuilder) createMachineDeployment(ctx context.Context, mdName string, template clusterv1.MachineTemplateSpec, workers int32) (*clusterv1.MachineDeployment, error) {
	mdLabels := b.labels()
	if b.topology() {
		mdLabels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] = "md-0"
	}
	mdFinalizers := []string{clusterv1.MachineDeploymentFinalizer}
	if b.topology() {
		mdFinalizers = append(mdFinalizers, clusterv1.MachineDeploymentTopologyFinalizer)
	}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            mdName,
			Labels:          mdLabels,
			Annotations:     map[string]string{clusterv1.RevisionAnnotation: "1"},
			Finalizers:      mdFinalizers,
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(b.cluster, false)},
		},
		Spec: clusterv1.MachineDeploymentSpec{ClusterName: b.wc.Name, Replicas: &workers, Template: template},
	}
	if b.topology() && b.opts.Live != nil {
		// As the topology controller computes it, so that its first
		// reconcile changes neither (a changed selector would orphan the
		// MachineSet, which would then scale up anew).
		md.Spec.Selector.MatchLabels = map[string]string{
			clusterv1.ClusterNameLabel:                          b.wc.Name,
			clusterv1.ClusterTopologyOwnedLabel:                 "",
			clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-0",
		}
		md.Spec.Template.Labels = b.labels(clusterv1.ClusterTopologyMachineDeploymentNameLabel, "md-0")
	}
	return md, b.w.create(ctx, md, nil)
}

// createMachineSet creates the MachineSet of a MachineDeployment, labelled
// and selected as the MachineDeployment controller makes it from template,
// and returns it with its Machine template.
func (b *clusterBuilder) createMachineSet(ctx context.Context, md *clusterv1.MachineDeployment, template clusterv1.MachineTemplateSpec, workers int32) (*clusterv1.MachineSet, clusterv1.MachineTemplateSpec, error) {
	msFinalizers := []string{clusterv1.MachineSetFinalizer}
	if b.topology() {
		msFinalizers = append(msFinalizers, clusterv1.MachineSetTopologyFinalizer)
	}
	hash := suffix(md.Name + "/template")
	msTemplate := *template.DeepCopy()
	msTemplate.Labels = map[string]string{}
	for k, v := range md.Spec.Template.Labels {
		msTemplate.Labels[k] = v
	}
	msTemplate.Labels[clusterv1.MachineDeploymentUniqueLabel] = hash
	// The MachineDeployment controller labels a MachineSet as its machines.
	msLabels := map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name}
	for k, v := range msTemplate.Labels {
		msLabels[k] = v
	}
	selector := metav1.LabelSelector{MatchLabels: map[string]string{}}
	for k, v := range md.Spec.Selector.MatchLabels {
		selector.MatchLabels[k] = v
	}
	selector.MatchLabels[clusterv1.MachineDeploymentUniqueLabel] = hash
	ms := &clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: b.wc.Namespace,
			Name:      md.Name + "-" + hash,
			Labels:    msLabels,
			Annotations: map[string]string{
				clusterv1.RevisionAnnotation:        "1",
				clusterv1.DesiredReplicasAnnotation: fmt.Sprint(workers),
				clusterv1.MaxReplicasAnnotation:     fmt.Sprint(workers + 1),
			},
			Finalizers:      msFinalizers,
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(md, true)},
		},
		Spec: clusterv1.MachineSetSpec{ClusterName: b.wc.Name, Replicas: &workers, Selector: selector, Template: msTemplate},
	}
	return ms, msTemplate, b.w.create(ctx, ms, nil)
}

// createWorkerMachines creates the Machines of a MachineSet, labelled as its
// template.
func (b *clusterBuilder) createWorkerMachines(ctx context.Context, ms *clusterv1.MachineSet, templateLabels map[string]string, bootstrapTemplate, mdName string, workers int32) error {
	var names []string
	for i := range int(workers) {
		name := ms.Name + "-" + suffix(fmt.Sprintf("%s/%s/%d", b.wc.Namespace, ms.Name, i))
		names = append(names, name)
		labels := map[string]string{}
		for k, v := range templateLabels {
			labels[k] = v
		}
		labels[clusterv1.MachineSetNameLabel] = ms.Name
		err := b.createMachine(ctx, machineParams{
			name:              name,
			owner:             ms,
			labels:            labels,
			bootstrap:         bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{}},
			bootstrapTemplate: bootstrapTemplate,
			infraTemplate:     mdName,
			flavor:            "small",
			failureDomain:     "zone-b",
		})
		if err != nil {
			return err
		}
	}
	b.wc.Machines = append(b.wc.Machines, names...)
	if b.opts.Hosts {
		return b.createHosts(ctx, names)
	}
	return nil
}

// createHosts creates a BareMetalHost for each of the worker machines,
// consumed by its LoopMachine, as CAPM3 has a Metal3Machine consume a
// host. They carry no status: the host controller provisions them.
func (b *clusterBuilder) createHosts(ctx context.Context, machines []string) error {
	for _, m := range machines {
		name := m + "-host"
		consumer := hostprovider.ConsumerRef{APIVersion: loopGV.String(), Kind: capiprovider.LoopMachineKind, Namespace: b.wc.Namespace, Name: m}
		host := hostprovider.NewHost(b.wc.Namespace, name, consumer, "loop-node-"+b.opts.KubernetesVersion)
		host.SetLabels(map[string]string{clusterv1.ClusterNameLabel: b.wc.Name})
		if err := b.w.create(ctx, host, nil); err != nil {
			return err
		}
		b.wc.Hosts = append(b.wc.Hosts, name)
	}
	return nil
}

// setWorkerStatuses writes the statuses of a MachineSet and its
// MachineDeployment whose Machines all run.
func (b *clusterBuilder) setWorkerStatuses(ctx context.Context, md *clusterv1.MachineDeployment, ms *clusterv1.MachineSet, workers int32) error {
	replicaStatus := func() (*int32, *int32, *int32, *int32) { return &workers, &workers, &workers, &workers }
	ms.Status.Replicas, ms.Status.ReadyReplicas, ms.Status.AvailableReplicas, ms.Status.UpToDateReplicas = replicaStatus()
	ms.Status.Selector = metav1.FormatLabelSelector(&ms.Spec.Selector)
	ms.Status.Versions = []clusterv1.StatusVersion{{Version: b.opts.KubernetesVersion, Replicas: workers}}
	ms.Status.ObservedGeneration = ms.Generation
	ms.Status.Conditions = steadyState(ms.Generation,
		isTrue(clusterv1.MachineSetMachinesReadyCondition, clusterv1.ReadyReason),
		isTrue(clusterv1.MachineSetMachinesUpToDateCondition, clusterv1.UpToDateReason),
		isFalse(clusterv1.MachineSetScalingUpCondition, clusterv1.NotScalingUpReason),
		isFalse(clusterv1.MachineSetScalingDownCondition, clusterv1.NotScalingDownReason),
		isFalse(clusterv1.MachineSetRemediatingCondition, clusterv1.NotRemediatingReason),
		notDeleting())
	if err := b.w.setStatus(ctx, ms); err != nil {
		return err
	}
	md.Status.Replicas, md.Status.ReadyReplicas, md.Status.AvailableReplicas, md.Status.UpToDateReplicas = replicaStatus()
	md.Status.Selector = metav1.FormatLabelSelector(&md.Spec.Selector)
	md.Status.Versions = []clusterv1.StatusVersion{{Version: b.opts.KubernetesVersion, Replicas: workers}}
	md.Status.Phase = string(clusterv1.MachineDeploymentPhaseRunning)
	md.Status.ObservedGeneration = md.Generation
	md.Status.Conditions = steadyState(md.Generation,
		isTrue(clusterv1.MachineDeploymentAvailableCondition, clusterv1.AvailableReason),
		isTrue(clusterv1.MachineDeploymentMachinesReadyCondition, clusterv1.ReadyReason),
		isTrue(clusterv1.MachineDeploymentMachinesUpToDateCondition, clusterv1.UpToDateReason),
		isFalse(clusterv1.MachineDeploymentRollingOutCondition, clusterv1.NotRollingOutReason),
		isFalse(clusterv1.MachineDeploymentScalingUpCondition, clusterv1.NotScalingUpReason),
		isFalse(clusterv1.MachineDeploymentScalingDownCondition, clusterv1.NotScalingDownReason),
		isFalse(clusterv1.MachineDeploymentRemediatingCondition, clusterv1.NotRemediatingReason),
		notDeleting())
	return b.w.setStatus(ctx, md)
}

// createMachinePool creates the cluster's MachinePool with its
// KubeadmConfig and LoopMachinePool, all with the statuses of running nodes.
func (b *clusterBuilder) createMachinePool(ctx context.Context) error {
	name := b.wc.Name + "-mp-0"
	replicas := int32(b.opts.MachinePoolReplicas)
	var providerIDs []string
	var nodeRefs []corev1.ObjectReference
	for i := range int(replicas) {
		node := fmt.Sprintf("%s-%d", name, i)
		providerIDs = append(providerIDs, capiprovider.LoopProviderIDPrefix+b.wc.Namespace+"/"+node)
		nodeRefs = append(nodeRefs, corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node})
	}
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            name,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: b.wc.Name},
			Finalizers:      []string{clusterv1.MachinePoolFinalizer},
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(b.cluster, false)},
		},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: b.wc.Name,
			Replicas:    &replicas,
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: b.wc.Name,
				Bootstrap: clusterv1.Bootstrap{
					ConfigRef:      clusterv1.ContractVersionedObjectReference{APIGroup: bootstrapGroup, Kind: "KubeadmConfig", Name: name},
					DataSecretName: ptr.To(name),
				},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: loopGroup, Kind: capiprovider.LoopMachinePoolKind, Name: name},
				Version:           b.opts.KubernetesVersion,
			}},
			ProviderIDList: providerIDs,
			FailureDomains: []string{"zone-b"},
		},
	}
	if err := b.w.create(ctx, mp, nil); err != nil {
		return err
	}
	if b.opts.Live != nil {
		for _, ref := range nodeRefs {
			if err := b.opts.Live.provision(ctx, b.wc.Namespace, capiprovider.LoopMachinePoolKind, name, ref.Name, "small", "", b.machineAddress(ref.Name), false, b.nodeInfo(ref.Name)); err != nil {
				return err
			}
		}
	}
	owner := []metav1.OwnerReference{b.w.ownerRef(mp, true)}
	labels := map[string]string{clusterv1.ClusterNameLabel: b.wc.Name, clusterv1.MachinePoolNameLabel: name}
	kc := &bootstrapv1.KubeadmConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.wc.Namespace, Name: name, Labels: labels, OwnerReferences: owner},
		Spec:       bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{}},
	}
	if err := b.createBootstrapConfig(ctx, kc); err != nil {
		return err
	}
	if err := b.createLoopMachinePool(ctx, name, labels, owner, providerIDs, replicas); err != nil {
		return err
	}
	return b.setMachinePoolStatus(ctx, mp, nodeRefs, replicas)
}

// createLoopMachinePool creates the LoopMachinePool of the MachinePool name,
// provisioned with the nodes of providerIDs.
func (b *clusterBuilder) createLoopMachinePool(ctx context.Context, name string, labels map[string]string, owner []metav1.OwnerReference, providerIDs []string, replicas int32) error {
	lmp := newLoop(capiprovider.LoopMachinePoolKind, b.wc.Namespace, name)
	lmp.SetLabels(labels)
	lmp.SetFinalizers([]string{loopMachinePoolFinalizer})
	lmp.SetOwnerReferences(owner)
	ids := make([]any, len(providerIDs))
	for i, id := range providerIDs {
		ids[i] = id
	}
	setNested(lmp, map[string]any{"providerIDList": ids, "template": map[string]any{"flavor": "small"}}, "spec")
	return b.w.create(ctx, lmp, func() {
		setNested(lmp, map[string]any{
			"initialization": map[string]any{"provisioned": true},
			"ready":          true,
			"replicas":       int64(replicas),
			"conditions":     conditionsJSON(conditions(lmp.GetGeneration(), isTrue(clusterv1.ReadyCondition, clusterv1.ReadyReason))),
		}, "status")
	})
}

// setMachinePoolStatus writes the status of a MachinePool whose nodes run.
func (b *clusterBuilder) setMachinePoolStatus(ctx context.Context, mp *clusterv1.MachinePool, nodeRefs []corev1.ObjectReference, replicas int32) error {
	mp.Status = clusterv1.MachinePoolStatus{
		Initialization:     clusterv1.MachinePoolInitializationStatus{InfrastructureProvisioned: ptr.To(true), BootstrapDataSecretCreated: ptr.To(true)},
		NodeRefs:           nodeRefs,
		Replicas:           &replicas,
		ReadyReplicas:      &replicas,
		AvailableReplicas:  &replicas,
		UpToDateReplicas:   &replicas,
		Versions:           []clusterv1.StatusVersion{{Version: b.opts.KubernetesVersion, Replicas: replicas}},
		Phase:              string(clusterv1.MachinePoolPhaseRunning),
		ObservedGeneration: mp.Generation,
		// MachinePool has no v1beta2 conditions of its own yet (CAPI v1.14):
		// its controller reports through the deprecated v1beta1 ones.
		Conditions: conditions(mp.Generation, isFalse(clusterv1.PausedCondition, clusterv1.NotPausedReason)),
		Deprecated: &clusterv1.MachinePoolDeprecatedStatus{V1Beta1: &clusterv1.MachinePoolV1Beta1DeprecatedStatus{
			Conditions: v1beta1Conditions( //nolint:staticcheck // what the MachinePool controller still reports
				clusterv1.ReadyV1Beta1Condition, clusterv1.BootstrapReadyV1Beta1Condition,
				clusterv1.InfrastructureReadyV1Beta1Condition, clusterv1.ReplicasReadyV1Beta1Condition),
		}},
	}
	return b.w.setStatus(ctx, mp)
}

func (b *clusterBuilder) createMachineHealthCheck(ctx context.Context) error {
	var workers []string
	for _, m := range b.wc.Machines {
		if strings.HasPrefix(m, b.name(b.wc.Name+"-md-0")) {
			workers = append(workers, m)
		}
	}
	n := int32(len(workers))
	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            b.wc.Name + "-workers-unhealthy",
			Labels:          map[string]string{clusterv1.ClusterNameLabel: b.wc.Name},
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(b.cluster, false)},
		},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: b.wc.Name,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: b.name(b.wc.Name + "-md-0")}},
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: ptr.To[int32](600),
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To[int32](300)},
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](300)},
				},
			},
		},
	}
	return b.w.create(ctx, mhc, func() {
		mhc.Status = clusterv1.MachineHealthCheckStatus{
			ExpectedMachines:    &n,
			CurrentHealthy:      &n,
			RemediationsAllowed: &n,
			ObservedGeneration:  mhc.Generation,
			Targets:             workers,
			Conditions: steadyState(mhc.Generation,
				isTrue(clusterv1.MachineHealthCheckRemediationAllowedCondition, "RemediationAllowed")),
		}
	})
}

func (b *clusterBuilder) createResourceSetBinding(ctx context.Context) error {
	if b.opts.Live != nil {
		// The ClusterResourceSet controller, which does not look at the
		// Cluster's pause, makes the binding as soon as the Cluster exists
		// and applies the resources to the workload cluster itself.
		return nil
	}
	applied := metav1.NewTime(time.Now().Truncate(time.Second))
	var resources []addonsv1.ResourceBinding
	for _, r := range b.crs.resources {
		resources = append(resources, addonsv1.ResourceBinding{
			ResourceRef:     r,
			Hash:            "sha256:" + suffix(b.wc.Name+r.Kind+r.Name) + strings.Repeat("0", 59),
			LastAppliedTime: applied,
			Applied:         ptr.To(true),
		})
	}
	binding := &addonsv1.ClusterResourceSetBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       b.wc.Namespace,
			Name:            b.wc.Name,
			OwnerReferences: []metav1.OwnerReference{b.w.ownerRef(b.crs.crs, false)},
		},
		Spec: addonsv1.ClusterResourceSetBindingSpec{
			ClusterName: b.wc.Name,
			Bindings:    []addonsv1.ResourceSetBinding{{ClusterResourceSetName: b.crs.crs.Name, Resources: resources}},
		},
	}
	return b.w.create(ctx, binding, nil)
}

// unpause hands a live fleet's complete cluster over to the controllers.
func (b *clusterBuilder) unpause(ctx context.Context) error {
	if b.opts.Live == nil {
		return nil
	}
	patch := client.MergeFrom(b.cluster.DeepCopy())
	b.cluster.Spec.Paused = nil
	if err := b.w.c.Patch(ctx, b.cluster, patch); err != nil {
		return fmt.Errorf("unpausing Cluster %s/%s: %w", b.wc.Namespace, b.wc.Name, err)
	}
	return nil
}

// setClusterStatus writes the status of a provisioned Cluster: what
// clusterctl move checks (infrastructure provisioned, control plane
// initialized) and the rest of what the cluster controller reports.
func (b *clusterBuilder) setClusterStatus(ctx context.Context) error {
	c := b.cluster
	cp := int32(b.opts.ControlPlaneReplicas)
	workers := int32(*b.opts.Workers) + int32(b.opts.MachinePoolReplicas)
	conds := []metav1.Condition{
		isTrue(clusterv1.ClusterAvailableCondition, clusterv1.AvailableReason),
		isTrue(clusterv1.ClusterInfrastructureReadyCondition, clusterv1.ReadyReason),
		isTrue(clusterv1.ClusterControlPlaneInitializedCondition, clusterv1.ClusterControlPlaneInitializedReason),
		isTrue(clusterv1.ClusterControlPlaneAvailableCondition, clusterv1.AvailableReason),
		isTrue(clusterv1.ClusterWorkersAvailableCondition, clusterv1.AvailableReason),
		isTrue(clusterv1.ClusterControlPlaneMachinesReadyCondition, clusterv1.ReadyReason),
		isTrue(clusterv1.ClusterWorkerMachinesReadyCondition, clusterv1.ReadyReason),
		isTrue(clusterv1.ClusterControlPlaneMachinesUpToDateCondition, clusterv1.UpToDateReason),
		isTrue(clusterv1.ClusterWorkerMachinesUpToDateCondition, clusterv1.UpToDateReason),
		isTrue(clusterv1.ClusterRemoteConnectionProbeCondition, "ProbeSucceeded"),
		isFalse(clusterv1.ClusterRollingOutCondition, clusterv1.NotRollingOutReason),
		isFalse(clusterv1.ClusterScalingUpCondition, clusterv1.NotScalingUpReason),
		isFalse(clusterv1.ClusterScalingDownCondition, clusterv1.NotScalingDownReason),
		isFalse(clusterv1.ClusterRemediatingCondition, clusterv1.NotRemediatingReason),
		notDeleting(),
	}
	if b.topology() {
		conds = append(conds, isTrue(clusterv1.ClusterTopologyReconciledCondition, clusterv1.ClusterTopologyReconcileSucceededReason))
	}
	c.Status = clusterv1.ClusterStatus{
		Initialization: clusterv1.ClusterInitializationStatus{InfrastructureProvisioned: ptr.To(true), ControlPlaneInitialized: ptr.To(true)},
		ControlPlane: &clusterv1.ClusterControlPlaneStatus{
			DesiredReplicas: &cp, Replicas: &cp, UpToDateReplicas: &cp, ReadyReplicas: &cp, AvailableReplicas: &cp,
		},
		Workers: &clusterv1.WorkersStatus{
			DesiredReplicas: &workers, Replicas: &workers, UpToDateReplicas: &workers, ReadyReplicas: &workers, AvailableReplicas: &workers,
		},
		FailureDomains: []clusterv1.FailureDomain{
			{Name: "zone-a", ControlPlane: ptr.To(true)},
			{Name: "zone-b", ControlPlane: ptr.To(false)},
		},
		Phase:              string(clusterv1.ClusterPhaseProvisioned),
		ObservedGeneration: c.Generation,
		Conditions:         steadyState(c.Generation, conds...),
	}
	return b.w.setStatus(ctx, c)
}
