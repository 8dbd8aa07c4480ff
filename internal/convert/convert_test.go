package convert_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1" //nolint:staticcheck // the fixtures' version
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1" //nolint:staticcheck // the fixtures' version
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1" //nolint:staticcheck // the fixtures' version
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // the fixtures' version
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1" //nolint:staticcheck // the fixtures' version
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1" //nolint:staticcheck // the fixtures' version
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/convert/converttest"
)

// scheme holds the Go types of both versions, to check that what Convert
// writes is what those types hold (a strict decode fails on any field the
// type does not have).
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clusterv1beta1.AddToScheme, clusterv1.AddToScheme, addonsv1beta1.AddToScheme, addonsv1.AddToScheme,
		ipamv1beta1.AddToScheme, ipamv1.AddToScheme, runtimev1alpha1.AddToScheme, runtimev1.AddToScheme,
		bootstrapv1beta1.AddToScheme, bootstrapv1.AddToScheme, controlplanev1beta1.AddToScheme, controlplanev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

const ns = "fleet-a"

// fixture returns the fixture of a kind and name.
func fixture(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range converttest.Objects(ns) {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no fixture %s %s", kind, name)
	return nil
}

// typed decodes u strictly into the Go type of its version, and fails the
// test when u holds a field that type does not have.
func typed(t *testing.T, u *unstructured.Unstructured) runtime.Object {
	t.Helper()
	obj, err := scheme.New(u.GroupVersionKind())
	if err != nil {
		t.Fatalf("no Go type for %s: %v", u.GroupVersionKind(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.DeepCopy().Object, obj, true); err != nil {
		t.Fatalf("%s %s is not a %s as Cluster API's Go type has it: %v", u.GetKind(), u.GetName(), u.GroupVersionKind().Version, err)
	}
	return obj
}

// canonical is u as the Go type of its version writes it: durations as
// "5m0s", fields without omitempty present. Two objects that mean the same
// are equal in this form.
func canonical(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed(t, u))
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// at returns the value at a path such as "spec.template.spec" or
// "status.conditions[0]".
func at(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		name, index, indexed := strings.Cut(part, "[")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
		if indexed {
			i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			l, ok := cur.([]any)
			if err != nil || !ok || i >= len(l) {
				return nil, false
			}
			cur = l[i]
		}
	}
	return cur, true
}

func fromYAML(t *testing.T, text string) any {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := utiljson.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func up(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := convert.Convert(context.Background(), obj, "v1beta2", nil)
	if err != nil {
		t.Fatalf("converting %s %s to v1beta2: %v", obj.GetKind(), obj.GetName(), err)
	}
	return out
}

// TestConvertToV1beta2 checks where Cluster API's conversion puts each
// kind's fields: every fixture converts, its result is a valid object of
// the v1beta2 Go type, and the fields whose place or shape changed are
// where v1beta2 has them.
func TestConvertToV1beta2(t *testing.T) {
	type landing struct {
		path string
		want string // YAML
	}
	tests := []struct {
		kind, name string
		landings   []landing
	}{
		{"Cluster", "prod", []landing{
			{"spec.infrastructureRef", "{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerCluster, name: prod}"},
			{"spec.controlPlaneRef", "{apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: prod-control-plane}"},
			{"spec.clusterNetwork.apiServerPort", "6443"},
			{"status.initialization", "{infrastructureProvisioned: true, controlPlaneInitialized: true}"},
			{"status.failureDomains", `[{name: fd1, controlPlane: true}, {name: fd2, controlPlane: true, attributes: {zone: b}}, {name: fd3, controlPlane: false}]`},
			{"status.controlPlane", "{desiredReplicas: 3, replicas: 3, upToDateReplicas: 3, readyReplicas: 3, availableReplicas: 3}"},
			{"status.phase", "Provisioned"},
		}},
		{"Cluster", "edge", []landing{
			{"spec.topology.classRef", "{name: quick-start, namespace: " + ns + "}"},
			{"spec.topology.controlPlane.deletion", "{nodeDeletionTimeoutSeconds: 10}"},
			{"spec.topology.workers.machineDeployments[0].deletion", "{nodeDrainTimeoutSeconds: 120}"},
			{"spec.topology.workers.machineDeployments[0].variables.overrides", "[{name: imageRepository, value: registry.example.com}]"},
			{"spec.topology.variables", "[{name: imageRepository, value: registry.k8s.io}]"},
		}},
		{"ClusterClass", "quick-start", []landing{
			{"spec.infrastructure.templateRef", "{apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: DockerClusterTemplate, name: quick-start-cluster}"},
			{"spec.controlPlane.templateRef", "{apiVersion: controlplane.cluster.x-k8s.io/v1beta1, kind: KubeadmControlPlaneTemplate, name: quick-start-control-plane}"},
			{"spec.controlPlane.machineInfrastructure.templateRef.kind", "DockerMachineTemplate"},
			{"spec.controlPlane.deletion", "{nodeDrainTimeoutSeconds: 300}"},
			{"spec.controlPlane.healthCheck", `{checks: {nodeStartupTimeoutSeconds: 600, unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 300}, {type: Ready, status: "False", timeoutSeconds: 300}]}, remediation: {triggerIf: {unhealthyLessThanOrEqualTo: 33%}}}`},
			{"spec.workers.machineDeployments[0].bootstrap.templateRef.kind", "KubeadmConfigTemplate"},
			{"spec.workers.machineDeployments[0].naming.template", "'{{ .cluster.name }}-{{ .machineDeployment.topologyName }}-{{ .random }}'"},
			{"spec.workers.machineDeployments[0].rollout.strategy", "{type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}"},
			{"status.variables[0].definitions[0].from", "inline"},
		}},
		{"MachineDeployment", "prod-md-0", []landing{
			{"spec.template.spec.infrastructureRef", "{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: prod-md-0}"},
			{"spec.template.spec.bootstrap.configRef", "{apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: prod-md-0}"},
			{"spec.template.spec.deletion", "{nodeDrainTimeoutSeconds: 120, nodeVolumeDetachTimeoutSeconds: 300, nodeDeletionTimeoutSeconds: 10}"},
			{"spec.template.spec.minReadySeconds", "0"},
			{"spec.rollout.strategy", "{type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}"},
			{"spec.deletion.order", "Oldest"},
			{"status.upToDateReplicas", "2"},
			{"status.deprecated.v1beta1", `{updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2, unavailableReplicas: 0, conditions: [{type: Ready, status: "True", lastTransitionTime: "2026-04-01T09:06:00Z"}, {type: Available, status: "True", lastTransitionTime: "2026-04-01T09:06:00Z"}, {type: MachineSetReady, status: "True", lastTransitionTime: "2026-04-01T09:06:00Z"}]}`},
		}},
		{"MachineSet", "prod-md-0-7b9c4", []landing{
			{"spec.template.spec.infrastructureRef", "{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: prod-md-0}"},
			{"spec.deletion.order", "Oldest"},
			{"status.deprecated.v1beta1.fullyLabeledReplicas", "2"},
			{"status.replicas", "2"},
		}},
		{"Machine", "prod-md-0-7b9c4-xk2lp", []landing{
			{"spec.infrastructureRef", "{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachine, name: prod-md-0-7b9c4-xk2lp}"},
			{"spec.bootstrap", "{configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: prod-md-0-7b9c4-xk2lp}, dataSecretName: prod-md-0-7b9c4-xk2lp}"},
			{"spec.deletion", "{nodeDrainTimeoutSeconds: 120, nodeVolumeDetachTimeoutSeconds: 300, nodeDeletionTimeoutSeconds: 10}"},
			{"status.initialization", "{bootstrapDataSecretCreated: true, infrastructureProvisioned: true}"},
			{"status.nodeRef", "{name: prod-md-0-7b9c4-xk2lp}"},
			{"status.addresses[1]", "{type: InternalIP, address: 172.18.0.7}"},
			{"status.nodeInfo.kubeletVersion", "v1.33.1"},
		}},
		{"MachineHealthCheck", "prod-md-0-unhealthy", []landing{
			{"spec.checks", `{nodeStartupTimeoutSeconds: 600, unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 300}, {type: Ready, status: "False", timeoutSeconds: 300}], unhealthyMachineConditions: [{type: InfrastructureReady, status: "False", timeoutSeconds: 600}]}`},
			{"spec.remediation", "{triggerIf: {unhealthyLessThanOrEqualTo: 40%}}"},
			{"status.targets", "[prod-md-0-7b9c4-xk2lp, prod-md-0-7b9c4-zq8nw]"},
		}},
		{"MachinePool", "prod-mp-0", []landing{
			{"spec.template.spec.infrastructureRef", "{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachinePool, name: prod-mp-0}"},
			{"spec.template.spec.minReadySeconds", "30"},
			{"spec.template.spec.deletion", "{nodeDrainTimeoutSeconds: 120, nodeDeletionTimeoutSeconds: 10}"},
			{"status.initialization", "{bootstrapDataSecretCreated: true, infrastructureProvisioned: true}"},
			{"status.nodeRefs[0]", "{apiVersion: v1, kind: Node, name: prod-mp-0-0, uid: 0c6b5bd8-0000-4000-8000-000000000010}"},
			{"status.deprecated.v1beta1.readyReplicas", "3"},
		}},
		{"KubeadmConfig", "prod-md-0-7b9c4-xk2lp", []landing{
			{"spec.joinConfiguration.nodeRegistration.kubeletExtraArgs", `[{name: eviction-hard, value: "nodefs.available<0%,imagefs.available<0%"}]`},
			{"spec.joinConfiguration.discovery.bootstrapToken.apiServerEndpoint", "172.18.0.3:6443"},
			{"status.initialization", "{dataSecretCreated: true}"},
			{"status.dataSecretName", "prod-md-0-7b9c4-xk2lp"},
		}},
		{"KubeadmConfigTemplate", "prod-md-0", []landing{
			{"spec.template.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs", `[{name: eviction-hard, value: "nodefs.available<0%,imagefs.available<0%"}]`},
			// An empty list means "no taints" (nil: the default taints),
			// in both versions.
			{"spec.template.spec.joinConfiguration.nodeRegistration.taints", "[]"},
		}},
		{"KubeadmControlPlane", "prod-control-plane", []landing{
			{"spec.machineTemplate.spec.infrastructureRef", "{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: prod-control-plane}"},
			{"spec.machineTemplate.spec.deletion", "{nodeDrainTimeoutSeconds: 60, nodeDeletionTimeoutSeconds: 10}"},
			{"spec.machineTemplate.metadata.labels", "{role: control-plane}"},
			{"spec.rollout.strategy", "{type: RollingUpdate, rollingUpdate: {maxSurge: 1}}"},
			{"spec.kubeadmConfigSpec.clusterConfiguration.apiServer.extraArgs", `[{name: audit-log-maxage, value: "30"}]`},
			{"status.initialization", "{controlPlaneInitialized: true}"},
			{"status.upToDateReplicas", "3"},
			{"status.deprecated.v1beta1.updatedReplicas", "3"},
		}},
		{"KubeadmControlPlaneTemplate", "quick-start-control-plane", []landing{
			{"spec.template.spec.machineTemplate.spec.deletion", "{nodeDrainTimeoutSeconds: 60}"},
			{"spec.template.spec.rollout.strategy", "{type: RollingUpdate, rollingUpdate: {maxSurge: 1}}"},
			{"spec.template.spec.kubeadmConfigSpec.clusterConfiguration.controllerManager.extraArgs", `[{name: enable-hostpath-provisioner, value: "true"}]`},
		}},
		{"ClusterResourceSet", "calico", []landing{
			{"spec.strategy", "Reconcile"},
			{"spec.resources", "[{kind: ConfigMap, name: calico-manifests}, {kind: Secret, name: calico-credentials}]"},
		}},
		{"ClusterResourceSetBinding", "prod", []landing{
			{"spec.clusterName", "prod"},
			{"spec.bindings[0].resources[0]", `{kind: ConfigMap, name: calico-manifests, applied: true, hash: "sha256:3b1e5c7d", lastAppliedTime: "2026-04-01T09:05:30Z"}`},
		}},
		{"MachineDrainRule", "skip-storage", []landing{
			{"spec.drain", "{behavior: Drain, order: 100}"},
		}},
		{"IPAddressClaim", "prod-md-0-7b9c4-xk2lp-eth0", []landing{
			{"spec.poolRef", "{apiGroup: ipam.cluster.x-k8s.io, kind: InClusterIPPool, name: prod-pool}"},
			{"spec.clusterName", "prod"},
			{"status.addressRef", "{name: prod-md-0-7b9c4-xk2lp-eth0}"},
		}},
		{"IPAddress", "prod-md-0-7b9c4-xk2lp-eth0", []landing{
			{"spec", "{address: 10.10.0.17, prefix: 24, gateway: 10.10.0.1, claimRef: {name: prod-md-0-7b9c4-xk2lp-eth0}, poolRef: {apiGroup: ipam.cluster.x-k8s.io, kind: InClusterIPPool, name: prod-pool}}"},
		}},
		{"ExtensionConfig", "lifecycle-hooks", []landing{
			{"spec.clientConfig.service", "{name: lifecycle-hooks, namespace: " + ns + ", port: 443}"},
			{"status.handlers[0]", "{name: before-cluster-create.lifecycle-hooks, requestHook: {apiVersion: hooks.runtime.cluster.x-k8s.io/v1alpha1, hook: BeforeClusterCreate}, timeoutSeconds: 10, failurePolicy: Fail}"},
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("a %s converts to v1beta2 with its fields where v1beta2 has them", tt.kind), func(t *testing.T) {
			in := fixture(t, tt.kind, tt.name)
			before := in.DeepCopy()
			out := up(t, in)
			if diff := cmp.Diff(before.Object, in.Object); diff != "" {
				t.Errorf("Convert changed its input (-before +after):\n%s", diff)
			}

			gv := schema.GroupVersion{Group: in.GroupVersionKind().Group, Version: "v1beta2"}
			if out.GetAPIVersion() != gv.String() || out.GetKind() != tt.kind {
				t.Errorf("converted to %s %s, want %s %s", out.GetAPIVersion(), out.GetKind(), gv, tt.kind)
			}
			typed(t, out)

			// Metadata is the object's identity and ownership: the
			// conversion keeps every field of it.
			if diff := cmp.Diff(in.Object["metadata"], out.Object["metadata"]); diff != "" {
				t.Errorf("metadata changed (-v1beta1 +v1beta2):\n%s", diff)
			}
			// The conditions of the v1beta1 contract stay, under
			// status.deprecated.v1beta1; those the older release already
			// kept for v1beta2 become the conditions.
			if conditions, ok := at(in.Object, "status.conditions"); ok {
				got, _ := at(out.Object, "status.deprecated.v1beta1.conditions")
				if diff := cmp.Diff(conditions, got); diff != "" {
					t.Errorf("status.conditions did not land in status.deprecated.v1beta1.conditions (-v1beta1 +v1beta2):\n%s", diff)
				}
			}
			if conditions, ok := at(in.Object, "status.v1beta2.conditions"); ok {
				got, _ := at(out.Object, "status.conditions")
				if diff := cmp.Diff(conditions, got); diff != "" {
					t.Errorf("status.v1beta2.conditions did not become status.conditions (-v1beta1 +v1beta2):\n%s", diff)
				}
			}
			if _, ok := at(out.Object, "status.v1beta2"); ok {
				t.Errorf("status.v1beta2 is still there: %v", out.Object["status"])
			}

			for _, l := range tt.landings {
				got, ok := at(out.Object, l.path)
				want := fromYAML(t, l.want)
				if want == nil && !ok {
					continue
				}
				if !ok {
					t.Errorf("%s: missing, want %s", l.path, l.want)
					continue
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", l.path, diff)
				}
			}
		})
	}
}

// droppedByClusterAPI are the fields of the fixtures that Cluster API's
// conversion to v1beta2 drops by design (its v1beta2 has no such field and
// its controllers never acted on them), so that a round trip cannot bring
// them back. An upgrade in place drops them too. Anything else a round trip
// changes is a loss.
var droppedByClusterAPI = map[string][]string{
	// v1beta2 MachineDeployments have neither: no controller of the v1beta1
	// releases enforced them, and v1.10 defaulted both on every object.
	"MachineDeployment": {"spec.progressDeadlineSeconds", "spec.revisionHistoryLimit"},
	// A v1beta2 nodeRef names the Node only; the controllers find it by name.
	"Machine": {"status.nodeRef.uid"},
}

// TestRoundTripThroughV1beta2 converts every fixture to v1beta2 and back:
// it is what it was, but for the fields Cluster API drops by design, and the
// annotation its conversion back writes (for most kinds) to restore what
// v1beta1 cannot hold.
func TestRoundTripThroughV1beta2(t *testing.T) {
	for _, in := range converttest.Objects(ns) {
		version := in.GroupVersionKind().Version
		t.Run(fmt.Sprintf("a %s %s comes back from v1beta2 as it was", version, in.GetKind()), func(t *testing.T) {
			out := up(t, in)
			back, err := convert.Convert(context.Background(), out, version, converttest.ReferenceVersions)
			if err != nil {
				t.Fatalf("converting back to %s: %v", version, err)
			}
			want, got := canonical(t, in), canonical(t, back)
			for _, o := range []*unstructured.Unstructured{want, got} {
				annotations := o.GetAnnotations()
				delete(annotations, convert.DataAnnotation)
				if len(annotations) == 0 {
					annotations = nil
				}
				o.SetAnnotations(annotations)
			}
			for _, path := range droppedByClusterAPI[in.GetKind()] {
				if _, ok := at(want.Object, path); !ok {
					t.Errorf("%s: the fixture has no such field to drop; update droppedByClusterAPI", path)
				}
				unstructured.RemoveNestedField(want.Object, strings.Split(path, ".")...)
			}
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("the round trip changed the object (-before +after):\n%s", diff)
			}
		})
	}
}

// TestConvertRefuses checks that what Convert cannot convert is refused
// with a message that names the kind, both versions and what to do.
func TestConvertRefuses(t *testing.T) {
	dockerMachine := &unstructured.Unstructured{}
	dockerMachine.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta1")
	dockerMachine.SetKind("DockerMachine")
	dockerMachine.SetName("prod-md-0-7b9c4-xk2lp")
	dockerMachine.SetNamespace(ns)

	oldCluster := fixture(t, "Cluster", "prod")
	oldCluster.SetAPIVersion("cluster.x-k8s.io/v1alpha4")

	tests := []struct {
		name        string
		obj         *unstructured.Unstructured
		to          string
		unsupported bool
		want        []string
	}{
		{
			name: "a provider's kind is refused by name: it converts only in its provider",
			obj:  dockerMachine, to: "v1beta2", unsupported: true,
			want: []string{"DockerMachine.infrastructure.cluster.x-k8s.io", "from v1beta1 to v1beta2", "only in that provider", "install the same version of the provider"},
		},
		{
			name: "a version Cluster API's code does not convert from is refused, naming those it does",
			obj:  oldCluster, to: "v1beta2", unsupported: true,
			want: []string{"Cluster.cluster.x-k8s.io", "from v1alpha4 to v1beta2", "only between v1beta1, v1beta2", "upgrade Cluster API in the cluster that stores it at v1alpha4"},
		},
		{
			name: "a version Cluster API's code does not convert to is refused too",
			obj:  fixture(t, "Machine", "prod-md-0-7b9c4-xk2lp"), to: "v1beta3", unsupported: true,
			want: []string{"Machine.cluster.x-k8s.io", "from v1beta1 to v1beta3", "upgrade Cluster API in the cluster that stores it at v1beta3"},
		},
		{
			name: "a field the version's Go type does not know is refused, not dropped",
			obj: func() *unstructured.Unstructured {
				o := fixture(t, "Cluster", "prod")
				if err := unstructured.SetNestedField(o.Object, "ipv6", "spec", "clusterNetwork", "family"); err != nil {
					t.Fatal(err)
				}
				return o
			}(),
			to:   "v1beta2",
			want: []string{"Cluster.cluster.x-k8s.io " + ns + "/prod", `unknown field "spec.clusterNetwork.family"`, "would drop"},
		},
		{
			name: "the way back refuses to guess the version a reference names",
			obj:  up(t, fixture(t, "Machine", "prod-md-0-7b9c4-xk2lp")), to: "v1beta1",
			want: []string{"Machine.cluster.x-k8s.io " + ns + "/prod-md-0-7b9c4-xk2lp", "DockerMachine.infrastructure.cluster.x-k8s.io", "convert.ReferenceVersions"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := convert.Convert(context.Background(), tt.obj, tt.to, nil)
			if err == nil {
				t.Fatal("converted, want an error")
			}
			if got := convert.IsUnsupported(err); got != tt.unsupported {
				t.Errorf("IsUnsupported = %t, want %t (%v)", got, tt.unsupported, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestConvertToTheSameVersionCopies(t *testing.T) {
	in := fixture(t, "Cluster", "prod")
	out, err := convert.Convert(context.Background(), in, "v1beta1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in.Object, out.Object); diff != "" {
		t.Errorf("changed (-in +out):\n%s", diff)
	}
	out.SetName("other")
	if in.GetName() != "prod" {
		t.Error("the copy shares its maps with the input")
	}
}

func TestVersionsAndSupports(t *testing.T) {
	cluster := schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}
	versions, hub := convert.Versions(cluster)
	if diff := cmp.Diff([]string{"v1beta1", "v1beta2"}, versions); diff != "" || hub != "v1beta2" {
		t.Errorf("Versions(Cluster) = %v, %q; want [v1beta1 v1beta2], v1beta2", versions, hub)
	}
	ipAddress := schema.GroupKind{Group: "ipam.cluster.x-k8s.io", Kind: "IPAddress"}
	if versions, _ := convert.Versions(ipAddress); !slices.Equal(versions, []string{"v1alpha1", "v1beta1", "v1beta2"}) {
		t.Errorf("Versions(IPAddress) = %v, want every version Cluster API serves", versions)
	}
	dockerMachine := schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine"}
	for _, tt := range []struct {
		gk       schema.GroupKind
		from, to string
		want     bool
	}{
		{cluster, "v1beta1", "v1beta2", true},
		{cluster, "v1beta2", "v1beta1", true},
		{cluster, "v1alpha4", "v1beta2", false},
		{ipAddress, "v1alpha1", "v1beta1", true},
		{dockerMachine, "v1beta1", "v1beta2", false},
		{dockerMachine, "v1beta1", "v1beta1", true},
	} {
		if got := convert.Supports(tt.gk, tt.from, tt.to); got != tt.want {
			t.Errorf("Supports(%s, %s, %s) = %t, want %t", tt.gk, tt.from, tt.to, got, tt.want)
		}
	}
}
