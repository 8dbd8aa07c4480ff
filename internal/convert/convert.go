package convert

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1" //nolint:staticcheck // the older Cluster API stores it: converting from it is this package's job
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1" //nolint:staticcheck // the older Cluster API stores it: converting from it is this package's job
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1" //nolint:staticcheck // the older Cluster API stores it: converting from it is this package's job
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1" //nolint:staticcheck // the older Cluster API stores it: converting from it is this package's job
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1" //nolint:staticcheck // the older Cluster API stores it: converting from it is this package's job
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"   //nolint:staticcheck // the older Cluster API stores it: converting from it is this package's job
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1" //nolint:staticcheck // the older Cluster API stores it: converting from it is this package's job
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	bootstrapconversion "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/conversion"
	controlplaneconversion "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/conversion"
	coreconversion "sigs.k8s.io/cluster-api/core/webhooks/conversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// capiConverters are the converters Cluster API's providers register with
// their conversion webhooks (WithConverter in their admission setup), each
// with the hub it converts through: the kinds this package converts, and
// nothing else.
var capiConverters = []struct {
	hub       client.Object
	converter func(*runtime.Scheme) (conversion.Converter, error)
}{
	{&clusterv1.Cluster{}, coreconversion.Cluster},
	{&clusterv1.ClusterClass{}, coreconversion.ClusterClass},
	{&clusterv1.Machine{}, coreconversion.Machine},
	{&clusterv1.MachineSet{}, coreconversion.MachineSet},
	{&clusterv1.MachineDeployment{}, coreconversion.MachineDeployment},
	{&clusterv1.MachinePool{}, coreconversion.MachinePool},
	{&clusterv1.MachineHealthCheck{}, coreconversion.MachineHealthCheck},
	{&clusterv1.MachineDrainRule{}, coreconversion.MachineDrainRule},
	{&addonsv1.ClusterResourceSet{}, coreconversion.ClusterResourceSet},
	{&addonsv1.ClusterResourceSetBinding{}, coreconversion.ClusterResourceSetBinding},
	{&ipamv1.IPAddress{}, coreconversion.IPAddress},
	{&ipamv1.IPAddressClaim{}, coreconversion.IPAddressClaim},
	{&runtimev1.ExtensionConfig{}, coreconversion.ExtensionConfig},
	{&bootstrapv1.KubeadmConfig{}, bootstrapconversion.KubeadmConfig},
	{&bootstrapv1.KubeadmConfigTemplate{}, bootstrapconversion.KubeadmConfigTemplate},
	{&controlplanev1.KubeadmControlPlane{}, controlplaneconversion.KubeadmControlPlane},
	{&controlplanev1.KubeadmControlPlaneTemplate{}, controlplaneconversion.KubeadmControlPlaneTemplate},
}

// schemeBuilders are every version of those kinds, as the providers' own
// schemes hold them: a hub-and-spoke converter refuses to be built unless
// it has a spoke for every version of its kind the scheme knows.
var schemeBuilders = []func(*runtime.Scheme) error{
	clusterv1beta1.AddToScheme, clusterv1.AddToScheme,
	addonsv1beta1.AddToScheme, addonsv1.AddToScheme,
	ipamv1alpha1.AddToScheme, ipamv1beta1.AddToScheme, ipamv1.AddToScheme,
	runtimev1alpha1.AddToScheme, runtimev1.AddToScheme,
	bootstrapv1beta1.AddToScheme, bootstrapv1.AddToScheme,
	controlplanev1beta1.AddToScheme, controlplanev1.AddToScheme,
}

// kind is what converts one kind.
type kind struct {
	converter conversion.Converter
	// hub is the version every conversion of the kind goes through.
	hub string
	// versions are every version the converter takes, sorted.
	versions []string
}

type registry struct {
	scheme *runtime.Scheme
	kinds  map[schema.GroupKind]*kind
}

// theRegistry is built once: the converters are Cluster API's package
// variables, and building them only reads the scheme.
var theRegistry = sync.OnceValues(func() (*registry, error) {
	r := &registry{scheme: runtime.NewScheme(), kinds: map[schema.GroupKind]*kind{}}
	for _, add := range schemeBuilders {
		if err := add(r.scheme); err != nil {
			return nil, fmt.Errorf("building the scheme of Cluster API's kinds: %w", err)
		}
	}
	for _, c := range capiConverters {
		hub, err := apiutil.GVKForObject(c.hub, r.scheme)
		if err != nil {
			return nil, err
		}
		conv, err := c.converter(r.scheme)
		if err != nil {
			return nil, fmt.Errorf("building Cluster API's converter of %s: %w", kindString(hub.GroupKind()), err)
		}
		k := &kind{converter: conv, hub: hub.Version}
		for gvk := range r.scheme.AllKnownTypes() {
			if gvk.GroupKind() == hub.GroupKind() {
				k.versions = append(k.versions, gvk.Version)
			}
		}
		slices.Sort(k.versions)
		r.kinds[hub.GroupKind()] = k
	}
	return r, nil
})

func mustRegistry() *registry {
	r, err := theRegistry()
	if err != nil {
		// Cluster API's converters and types are compiled in: an error is
		// a build of the operator against an incompatible Cluster API.
		panic(err)
	}
	return r
}

// Versions returns the versions Convert converts a kind between (any one
// into any other), and the version it converts through (the storage
// version of the Cluster API release whose code it runs). None: the
// operator has no conversion code for the kind.
func Versions(gk schema.GroupKind) (versions []string, hub string) {
	k, ok := mustRegistry().kinds[gk]
	if !ok {
		return nil, ""
	}
	return slices.Clone(k.versions), k.hub
}

// Supports reports whether Convert converts objects of a kind from one
// version to the other. The same version is always supported: it needs
// no conversion.
func Supports(gk schema.GroupKind, from, to string) bool {
	if from == to {
		return true
	}
	versions, _ := Versions(gk)
	return slices.Contains(versions, from) && slices.Contains(versions, to)
}

// ReferenceVersions returns the API version ("group/version") that an
// object reference of the version converted to names for a referenced kind.
// Only the way back asks it: a v1beta2 reference names a group and a kind
// and leaves the version to the contract (the CRD's cluster.x-k8s.io/<contract>
// label), while a v1beta1 reference carries an apiVersion. Cluster API's
// webhooks answer from the CRDs of the cluster they run in; a move back
// answers from the target's: the version it stores the referenced kind at.
type ReferenceVersions func(ctx context.Context, gk schema.GroupKind) (string, error)

// Convert returns obj, an object as a cluster serves it, at the given
// version of its kind, converted by Cluster API's code; obj is not changed.
// refs answers the API versions of referenced kinds on the way back (see
// ReferenceVersions); nil is fine on the way up, which never asks.
//
// It fails with an *UnsupportedError when it has no code for the kind or
// for that pair of versions, and with another error when obj holds a field
// the Go type of its version does not know: Cluster API's webhook would
// drop it without a word, and a move must not.
//
// metadata.managedFields are left as they are: each entry names the
// version its fields are written in, and the API server converts them.
func Convert(ctx context.Context, obj *unstructured.Unstructured, version string, refs ReferenceVersions) (*unstructured.Unstructured, error) {
	from := obj.GroupVersionKind()
	if from.Version == version {
		return obj.DeepCopy(), nil
	}
	to := from.GroupKind().WithVersion(version)
	r := mustRegistry()
	k, ok := r.kinds[from.GroupKind()]
	if !ok || !slices.Contains(k.versions, from.Version) || !slices.Contains(k.versions, version) {
		var versions []string
		if ok {
			versions = slices.Clone(k.versions)
		}
		return nil, &UnsupportedError{GroupKind: from.GroupKind(), From: from.Version, To: version, Versions: versions}
	}

	src, err := r.scheme.New(from)
	if err != nil {
		return nil, err
	}
	// A deep copy: decoding may keep maps of obj inside src, and the way
	// back rewrites src's metadata (Cluster API's MarshalDataUnsafeNoCopy).
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.DeepCopy().Object, src, true); err != nil {
		return nil, fmt.Errorf("reading %s as Cluster API %s (sigs.k8s.io/cluster-api %s) knows it: %w; converting would drop what it does not know",
			describe(obj), from.Version, capiVersion(), err)
	}
	src.GetObjectKind().SetGroupVersionKind(from)
	dst, err := r.scheme.New(to)
	if err != nil {
		return nil, err
	}
	dst.GetObjectKind().SetGroupVersionKind(to)

	if version != k.hub {
		installReferenceVersions()
	}
	if err := k.converter.ConvertObject(context.WithValue(ctx, referenceVersionsKey{}, refs), src, dst); err != nil {
		return nil, fmt.Errorf("converting %s from %s to %s with Cluster API's code: %w", describe(obj), from.Version, version, err)
	}

	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dst)
	if err != nil {
		return nil, fmt.Errorf("encoding %s at %s: %w", describe(obj), version, err)
	}
	u := &unstructured.Unstructured{Object: out}
	u.SetGroupVersionKind(to)
	return u, nil
}

type referenceVersionsKey struct{}

// installReferenceVersions points Cluster API's conversion packages, whose
// way back asks a process-wide function for the versions of referenced
// kinds, at the ReferenceVersions of each Convert call, carried in its
// context; a conversion that is not Convert's (Cluster API's conversion
// webhooks served in the same process) is answered by what
// SetWebhookReferenceVersions gave. It runs at the first conversion to an
// older version, or at SetWebhookReferenceVersions, and replaces what the
// process had set with Cluster API's own setters.
var installReferenceVersions = sync.OnceFunc(func() {
	getter := func(ctx context.Context, gk schema.GroupKind) (string, error) {
		refs, isConvert := ctx.Value(referenceVersionsKey{}).(ReferenceVersions)
		if !isConvert {
			if webhooks := webhookReferenceVersions.Load(); webhooks != nil {
				return (*webhooks)(ctx, gk)
			}
		}
		if refs == nil {
			return "", fmt.Errorf("the API version of the referenced kind %s is needed to convert back, and none was given (convert.ReferenceVersions)", kindString(gk))
		}
		return refs(ctx, gk)
	}
	coreconversion.SetAPIVersionGetter(getter)
	controlplaneconversion.SetAPIVersionGetter(getter)
})

// webhookReferenceVersions answers the conversions back that are not
// Convert's (see SetWebhookReferenceVersions).
var webhookReferenceVersions atomic.Pointer[ReferenceVersions]

// SetWebhookReferenceVersions is, for a process that serves Cluster API's
// conversion webhooks itself (a test harness) and converts with Convert
// too, what Cluster API's SetAPIVersionGetter is for a provider's manager:
// the webhooks' conversions back ask f for the versions of referenced
// kinds, and Convert's ask the ReferenceVersions each call is given. Such a
// process must call it instead of Cluster API's setters, which the first
// conversion back here would replace.
func SetWebhookReferenceVersions(f ReferenceVersions) {
	webhookReferenceVersions.Store(&f)
	installReferenceVersions()
}

// UnsupportedError says Convert has no code for a kind, or for a pair of
// its versions.
type UnsupportedError struct {
	GroupKind schema.GroupKind
	// From and To are the versions asked.
	From, To string
	// Versions are those Cluster API's code converts the kind between;
	// empty when it has no code for the kind (a provider's kind).
	Versions []string
}

func (e *UnsupportedError) Error() string {
	k := kindString(e.GroupKind)
	if len(e.Versions) == 0 {
		return fmt.Sprintf("cannot convert %s from %s to %s: the operator converts only Cluster API's own kinds, with their code (sigs.k8s.io/cluster-api %s); "+
			"a provider's kinds convert only in that provider: install the same version of the provider that serves %s in both clusters, so that both store it at one version",
			k, e.From, e.To, capiVersion(), k)
	}
	var unknown []string
	if !slices.Contains(e.Versions, e.From) {
		unknown = append(unknown, fmt.Sprintf("the cluster that stores it at %s", e.From))
	}
	if !slices.Contains(e.Versions, e.To) {
		unknown = append(unknown, fmt.Sprintf("the cluster that stores it at %s", e.To))
	}
	return fmt.Sprintf("cannot convert %s from %s to %s: Cluster API's code (sigs.k8s.io/cluster-api %s) converts it only between %s; "+
		"upgrade Cluster API in %s to a release that stores it at one of those first",
		k, e.From, e.To, capiVersion(), strings.Join(e.Versions, ", "), strings.Join(unknown, " and "))
}

// IsUnsupported reports whether err says Convert has no code for a kind or
// a pair of its versions.
func IsUnsupported(err error) bool {
	var u *UnsupportedError
	return errors.As(err, &u)
}

// capiVersion is the version of the Cluster API module whose conversion
// code is compiled in, for messages that tell a user which code decided.
var capiVersion = sync.OnceValue(func() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "sigs.k8s.io/cluster-api" {
				return dep.Version
			}
		}
	}
	return "(version unknown)"
})

// kindString names a kind as kubectl names resources: "Kind.group".
func kindString(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

// describe names an object in messages: its kind, namespace and name.
func describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return kindString(obj.GroupVersionKind().GroupKind()) + " " + name
}
