package capiprovider

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"reflect"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/move-operator/move-operator/test/loopprovider"
)

// The "loop" infrastructure provider exists only in tests: its machines are
// simulated, nothing is provisioned. It follows the Cluster API v1beta2
// infrastructure contract, so everything that handles real providers
// generically (clusterctl's object graph, the move engine) handles it too
// (and the v1beta1 contract of Cluster API v1.10 on request, see
// loopprovider.ContractV1Beta1),
// and it brings what real providers bring to a move: a cluster-scoped identity
// labelled for move-hierarchy, a Secret in the provider's namespace, and a
// validating webhook served by the provider's own Deployment.

//go:embed loopconfig
var loopConfig embed.FS

// LoopGroupVersion is the API group and version of the loop provider's kinds.
var LoopGroupVersion = loopprovider.GroupVersion

// Kinds of the loop infrastructure provider.
const (
	LoopClusterKind         = loopprovider.ClusterKind
	LoopClusterTemplateKind = loopprovider.ClusterTemplateKind
	LoopMachineKind         = loopprovider.MachineKind
	LoopMachineTemplateKind = loopprovider.MachineTemplateKind
	LoopMachinePoolKind     = loopprovider.MachinePoolKind
	LoopClusterIdentityKind = loopprovider.ClusterIdentityKind
)

// LoopCRDs returns the loop provider's CRDs as its release manifests hold
// them, labelled as clusterctl labels them: for a cluster whose Cluster API
// is installed otherwise (package capirelease), to which a test adds the
// provider's controllers itself.
func LoopCRDs() ([]*unstructured.Unstructured, error) {
	loopFS, err := fs.Sub(loopConfig, "loopconfig")
	if err != nil {
		return nil, err
	}
	objs, err := render(loopFS, "crd")
	if err != nil {
		return nil, fmt.Errorf("rendering the loop provider's CRDs: %w", err)
	}
	for _, o := range objs {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[clusterctlv1.ClusterctlLabel] = ""
		labels["cluster.x-k8s.io/provider"] = clusterctlv1.ManifestLabel("loop", clusterctlv1.InfrastructureProviderType)
		o.SetLabels(labels)
	}
	return objs, nil
}

// LoopProviderIDPrefix starts every providerID of a simulated machine.
const LoopProviderIDPrefix = loopprovider.ProviderIDPrefix

type loopRule func(obj, old *unstructured.Unstructured) field.ErrorList

var loopRules = map[string]loopRule{
	LoopClusterKind:         validateLoopCluster,
	LoopClusterTemplateKind: immutableTemplateSpec,
	LoopMachineKind:         validateLoopMachine,
	LoopMachineTemplateKind: immutableTemplateSpec,
	LoopMachinePoolKind:     validateLoopMachinePool,
	LoopClusterIdentityKind: validateLoopClusterIdentity,
}

func setupLoopWebhooks(mgr manager.Manager, _ client.Reader) error {
	for kind, rule := range loopRules {
		path := "/validate-" + strings.ReplaceAll(LoopGroupVersion.Group, ".", "-") + "-" + LoopGroupVersion.Version + "-" + strings.ToLower(kind)
		mgr.GetWebhookServer().Register(path, &webhook.Admission{Handler: &loopValidator{kind: kind, rule: rule}})
	}
	return nil
}

// loopValidator is the validating webhook of one loop kind.
type loopValidator struct {
	kind string
	rule loopRule
}

func (v *loopValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	obj, err := decodeUnstructured(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old *unstructured.Unstructured
	if req.Operation == admissionv1.Update {
		if old, err = decodeUnstructured(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if errs := v.rule(obj, old); len(errs) > 0 {
		// The same response shape controller-runtime's typed validators give.
		status := apierrors.NewInvalid(LoopGroupVersion.WithKind(v.kind).GroupKind(), obj.GetName(), errs).ErrStatus
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	}
	return admission.Allowed("")
}

func decodeUnstructured(raw []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding the admitted object: %w", err)
	}
	return u, nil
}

func nested(o *unstructured.Unstructured, fields ...string) any {
	if o == nil {
		return nil
	}
	v, _, _ := unstructured.NestedFieldNoCopy(o.Object, fields...)
	return v
}

func validateLoopCluster(obj, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	endpoint := field.NewPath("spec", "controlPlaneEndpoint")
	// Like cloud providers: once the control plane has an address, moving it
	// would orphan the workload cluster.
	if oldHost, _ := nested(old, "spec", "controlPlaneEndpoint", "host").(string); oldHost != "" &&
		!reflect.DeepEqual(nested(old, "spec", "controlPlaneEndpoint"), nested(obj, "spec", "controlPlaneEndpoint")) {
		errs = append(errs, field.Forbidden(endpoint, "is immutable once set"))
	}
	if host, _ := nested(obj, "spec", "controlPlaneEndpoint", "host").(string); host != "" && !strings.HasPrefix(host, "127.") {
		errs = append(errs, field.Invalid(endpoint.Child("host"), host, "must be a loopback address: simulated clusters never point elsewhere"))
	}
	return errs
}

func validateLoopMachine(obj, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if id, _ := nested(obj, "spec", "providerID").(string); id != "" && !strings.HasPrefix(id, LoopProviderIDPrefix) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "providerID"), id, "must start with "+LoopProviderIDPrefix))
	}
	if old == nil {
		return errs
	}
	// The spec of a machine is immutable, except that the providerID is set
	// once the machine exists.
	oldSpec, _ := nested(old, "spec").(map[string]any)
	newSpec, _ := nested(obj, "spec").(map[string]any)
	for k, v := range newSpec {
		if k == "providerID" && nested(old, "spec", "providerID") == nil {
			continue
		}
		if !reflect.DeepEqual(oldSpec[k], v) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", k), "is immutable"))
		}
	}
	for k := range oldSpec {
		if _, ok := newSpec[k]; !ok {
			errs = append(errs, field.Forbidden(field.NewPath("spec", k), "is immutable"))
		}
	}
	return errs
}

func validateLoopMachinePool(obj, _ *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	ids, _ := nested(obj, "spec", "providerIDList").([]any)
	for i, id := range ids {
		if s, _ := id.(string); !strings.HasPrefix(s, LoopProviderIDPrefix) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "providerIDList").Index(i), id, "must start with "+LoopProviderIDPrefix))
		}
	}
	return errs
}

// immutableTemplateSpec is the rule of every Cluster API template: changing a
// template means creating a new one and rolling out.
func immutableTemplateSpec(obj, old *unstructured.Unstructured) field.ErrorList {
	if old == nil {
		return nil
	}
	if !reflect.DeepEqual(nested(old, "spec", "template", "spec"), nested(obj, "spec", "template", "spec")) {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "template", "spec"), "is immutable: create a new template instead")}
	}
	return nil
}

func validateLoopClusterIdentity(obj, _ *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	list := field.NewPath("spec", "allowedNamespaces", "list")
	namespaces, _ := nested(obj, "spec", "allowedNamespaces", "list").([]any)
	for i, ns := range namespaces {
		s, _ := ns.(string)
		for _, msg := range validation.IsDNS1123Label(s) {
			errs = append(errs, field.Invalid(list.Index(i), ns, msg))
		}
	}
	return errs
}
