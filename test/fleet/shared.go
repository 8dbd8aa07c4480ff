package fleet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/move-operator/move-operator/test/capiprovider"
)

// Labels the fixture puts on objects besides Cluster API's own.
const (
	// CNILabel selects the clusters a namespace's ClusterResourceSet applies to.
	CNILabel = "fleet.move-operator.test/cni"
	// ProviderNamespace is where the loop provider's controller (and the
	// identity's credentials) live.
	ProviderNamespace = "capl-system"
)

// Names of the ClusterClass in each namespace that has one, and of its classes.
const (
	ClusterClassName   = "loop-quick-start"
	workerClass        = "default-worker"
	clusterResourceSet = "cni-loop"
)

func newLoop(kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(loopGV.WithKind(kind))
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func setNested(u *unstructured.Unstructured, value any, fields ...string) {
	if err := unstructured.SetNestedField(u.Object, value, fields...); err != nil {
		panic(fmt.Sprintf("setting %v of %s: %v", fields, u.GetKind(), err))
	}
}

// conditions builds conditions, all observed at generation gen.
func conditions(gen int64, conds ...metav1.Condition) []metav1.Condition {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range conds {
		conds[i].ObservedGeneration = gen
		conds[i].LastTransitionTime = now
	}
	return conds
}

func isTrue(t, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason}
}

func isFalse(t, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason}
}

// conditionsJSON renders conditions for an unstructured status.
func conditionsJSON(conds []metav1.Condition) []any {
	out := make([]any, len(conds))
	for i, c := range conds {
		out[i] = map[string]any{
			"type": c.Type, "status": string(c.Status), "reason": c.Reason,
			"observedGeneration": c.ObservedGeneration,
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		}
	}
	return out
}

// steadyState adds Paused=False, which every v1beta2 controller reports on
// what it reconciles, to conds.
func steadyState(gen int64, conds ...metav1.Condition) []metav1.Condition {
	return conditions(gen, append(conds, isFalse(clusterv1.PausedCondition, clusterv1.NotPausedReason))...)
}

// notDeleting is reported by the controllers of Clusters, control planes,
// MachineDeployments, MachineSets and Machines.
func notDeleting() metav1.Condition {
	return isFalse(clusterv1.DeletingCondition, clusterv1.NotDeletingReason)
}

// createIdentity creates the cluster-scoped LoopClusterIdentity every
// LoopCluster uses, and the credentials Secret it points at in the provider's
// namespace, owned by the identity (as cloud providers' identity controllers
// do), so that both move together.
func createIdentity(ctx context.Context, w *writer, opts Options) (string, error) {
	name := opts.Name + "-identity"
	id := newLoop(capiprovider.LoopClusterIdentityKind, "", name)
	id.SetLabels(map[string]string{clusterctlv1.ClusterctlMoveHierarchyLabel: ""})
	setNested(id, name+"-credentials", "spec", "secretRef")
	namespaces := make([]any, len(opts.Namespaces))
	for i, ns := range opts.Namespaces {
		namespaces[i] = ns
	}
	setNested(id, namespaces, "spec", "allowedNamespaces", "list")
	if err := w.create(ctx, id, func() {
		setNested(id, conditionsJSON(conditions(id.GetGeneration(), isTrue(clusterv1.ReadyCondition, clusterv1.ReadyReason))), "status", "conditions")
	}); err != nil {
		return "", err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ProviderNamespace,
			Name:            name + "-credentials",
			OwnerReferences: []metav1.OwnerReference{w.ownerRef(id, false)},
		},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"accessKeyID": "loop-" + suffix(name), "secretAccessKey": "not-a-real-secret-" + suffix(name+"/key")},
	}
	if err := w.create(ctx, secret, nil); err != nil {
		return "", err
	}
	return name, nil
}

// classRefs names a ClusterClass and the templates it references.
type classRefs struct {
	namespace, name string
}

// createClusterClass creates a ClusterClass and its templates in ns, all
// templates owned by the ClusterClass (as the ClusterClass controller sets),
// and writes the status its controller writes, which the Cluster webhook
// requires before validating a topology against the class.
func createClusterClass(ctx context.Context, w *writer, ns string, live *Live) (*classRefs, error) {
	cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ClusterClassName}}
	infraTemplate := newLoop(capiprovider.LoopClusterTemplateKind, ns, ClusterClassName+"-cluster")
	setNested(infraTemplate, map[string]any{"failureDomains": []any{"zone-a", "zone-b"}}, "spec", "template", "spec")
	cpInfraTemplate := newLoop(capiprovider.LoopMachineTemplateKind, ns, ClusterClassName+"-control-plane")
	setNested(cpInfraTemplate, "large", "spec", "template", "spec", "flavor")
	workerInfraTemplate := newLoop(capiprovider.LoopMachineTemplateKind, ns, ClusterClassName+"-"+workerClass)
	setNested(workerInfraTemplate, "small", "spec", "template", "spec", "flavor")
	cpTemplate := &controlplanev1.KubeadmControlPlaneTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ClusterClassName + "-control-plane"}}
	if live != nil {
		cpTemplate.Spec.Template.Spec.KubeadmConfigSpec = live.kubeadmConfigSpec()
	}
	workerBootstrapTemplate := &bootstrapv1.KubeadmConfigTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ClusterClassName + "-" + workerClass}}

	ref := func(apiVersion, kind, name string) clusterv1.ClusterClassTemplateReference {
		return clusterv1.ClusterClassTemplateReference{APIVersion: apiVersion, Kind: kind, Name: name}
	}
	loopAPIVersion := loopGV.String()
	cc.Spec = clusterv1.ClusterClassSpec{
		Infrastructure: clusterv1.InfrastructureClass{TemplateRef: ref(loopAPIVersion, capiprovider.LoopClusterTemplateKind, infraTemplate.GetName())},
		ControlPlane: clusterv1.ControlPlaneClass{
			TemplateRef: ref(controlplanev1.GroupVersion.String(), "KubeadmControlPlaneTemplate", cpTemplate.Name),
			MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{
				TemplateRef: ref(loopAPIVersion, capiprovider.LoopMachineTemplateKind, cpInfraTemplate.GetName()),
			},
		},
		Workers: clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{{
			Class:          workerClass,
			Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: ref(bootstrapv1.GroupVersion.String(), "KubeadmConfigTemplate", workerBootstrapTemplate.Name)},
			Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: ref(loopAPIVersion, capiprovider.LoopMachineTemplateKind, workerInfraTemplate.GetName())},
		}}},
	}
	if err := w.create(ctx, cc, func() {
		cc.Status.ObservedGeneration = cc.Generation
		cc.Status.Conditions = steadyState(cc.Generation,
			isTrue(clusterv1.ClusterClassVariablesReadyCondition, "VariablesReady"),
			isTrue(clusterv1.ClusterClassRefVersionsUpToDateCondition, "RefVersionsUpToDate"))
	}); err != nil {
		return nil, err
	}
	owned := w.ownerRef(cc, false)
	for _, t := range []interface {
		SetOwnerReferences([]metav1.OwnerReference)
	}{infraTemplate, cpInfraTemplate, workerInfraTemplate, cpTemplate, workerBootstrapTemplate} {
		t.SetOwnerReferences([]metav1.OwnerReference{owned})
	}
	for _, u := range []*unstructured.Unstructured{infraTemplate, cpInfraTemplate, workerInfraTemplate} {
		if err := w.create(ctx, u, nil); err != nil {
			return nil, err
		}
	}
	if err := w.create(ctx, cpTemplate, nil); err != nil {
		return nil, err
	}
	if err := w.create(ctx, workerBootstrapTemplate, nil); err != nil {
		return nil, err
	}
	return &classRefs{namespace: ns, name: cc.Name}, nil
}

// crsInfo is a namespace's ClusterResourceSet, for the bindings.
type crsInfo struct {
	crs       *addonsv1.ClusterResourceSet
	resources []addonsv1.ResourceRef
}

// createClusterResourceSet creates a ClusterResourceSet applying a Secret and
// a ConfigMap to every cluster labelled with CNILabel, both resources owned
// by it as its controller sets.
func createClusterResourceSet(ctx context.Context, w *writer, ns string) (*crsInfo, error) {
	crs := &addonsv1.ClusterResourceSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterResourceSet, Finalizers: []string{addonsv1.ClusterResourceSetFinalizer}},
		Spec: addonsv1.ClusterResourceSetSpec{
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{CNILabel: "loop"}},
			Resources: []addonsv1.ResourceRef{
				{Kind: "Secret", Name: clusterResourceSet + "-secret"},
				{Kind: "ConfigMap", Name: clusterResourceSet + "-config"},
			},
			Strategy: string(addonsv1.ClusterResourceSetStrategyApplyOnce),
		},
	}
	if err := w.create(ctx, crs, func() {
		crs.Status.ObservedGeneration = crs.Generation
		crs.Status.Conditions = steadyState(crs.Generation,
			isTrue(addonsv1.ClusterResourceSetResourcesAppliedCondition, "Applied"))
	}); err != nil {
		return nil, err
	}
	owner := []metav1.OwnerReference{w.ownerRef(crs, false)}
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loop-cni\n  namespace: kube-system\ndata:\n  mode: loopback\n"
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterResourceSet + "-secret", OwnerReferences: owner},
		Type:       addonsv1.ClusterResourceSetSecretType,
		StringData: map[string]string{"cni-secret.yaml": manifest},
	}
	if err := w.create(ctx, secret, nil); err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterResourceSet + "-config", OwnerReferences: owner},
		Data:       map[string]string{"cni.yaml": manifest},
	}
	if err := w.create(ctx, cm, nil); err != nil {
		return nil, err
	}
	return &crsInfo{crs: crs, resources: crs.Spec.Resources}, nil
}

// v1beta1Conditions builds True conditions in the deprecated v1beta1 format,
// which some controllers (MachinePool's) still report through.
//
//nolint:staticcheck // the deprecated format is the point
func v1beta1Conditions(types ...clusterv1.ConditionType) clusterv1.Conditions {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	out := make(clusterv1.Conditions, len(types))
	for i, t := range types {
		out[i] = clusterv1.Condition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	return out
}
