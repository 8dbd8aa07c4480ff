package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Provider is one installed provider, as an inventory records it.
type Provider struct {
	// Type is clusterctl's provider type: CoreProvider, BootstrapProvider,
	// ControlPlaneProvider, InfrastructureProvider, IPAMProvider,
	// RuntimeExtensionProvider or AddonProvider.
	Type string
	// Name is the provider's name, e.g. "cluster-api", "kubeadm", "aws".
	Name string
	// Version is the installed version; empty when the inventory does not
	// know it yet (cluster-api-operator has not finished installing it).
	Version string
	// Inventory says where it was read, for messages.
	Inventory string
}

func (p Provider) String() string { return p.Type + " " + p.Name }

// Where the providers of a cluster are recorded.
const (
	// ClusterctlInventory is clusterctl's inventory: its Provider objects.
	ClusterctlInventory = "clusterctl inventory"
	// OperatorInventory is cluster-api-operator's provider objects.
	OperatorInventory = "cluster-api-operator"
)

// clusterctlProviderGVK is clusterctl's inventory of installed providers.
var clusterctlProviderGVK = schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"}

// OperatorGroup is the API group of cluster-api-operator's provider objects.
const OperatorGroup = "operator.cluster.x-k8s.io"

// OperatorKinds are cluster-api-operator's provider kinds. Each kind's name
// is also clusterctl's type of the providers it installs, and an object's
// name is the provider's name (cluster-api-operator converts them so when
// it calls clusterctl's library).
var OperatorKinds = []string{
	"CoreProvider", "BootstrapProvider", "ControlPlaneProvider", "InfrastructureProvider",
	"IPAMProvider", "AddonProvider", "RuntimeExtensionProvider",
}

// ProviderMismatch is the failure of CheckProviders: providers of the
// source that the target lacks, or has at an older version. Any other error
// of CheckProviders is one of reading the clusters, worth a retry.
type ProviderMismatch struct {
	Problems []string
}

func (e *ProviderMismatch) Error() string {
	return fmt.Sprintf("the target's providers do not match the source's: %s; install the same providers in the target, at the same or a newer version, first (clusterctl init, or cluster-api-operator's provider objects)",
		strings.Join(e.Problems, "; "))
}

// CheckProviders fails with a *ProviderMismatch, naming them, when a
// provider installed in the source is not installed in the target or is
// older there. The providers of a cluster are those of its clusterctl
// inventory; a cluster without one (providers installed by
// cluster-api-operator, which keeps none) is read from cluster-api-operator's
// provider objects instead. A source with neither is not checked.
func CheckProviders(ctx context.Context, source, target client.Client) error {
	src, err := InstalledProviders(ctx, source)
	if err != nil {
		return fmt.Errorf("in the source: %w", err)
	}
	if len(src) == 0 {
		return nil
	}
	tgt, err := InstalledProviders(ctx, target)
	if err != nil {
		return fmt.Errorf("in the target: %w", err)
	}
	return CompareProviders(src, tgt)
}

// InstalledProviders reads the providers a cluster records: its clusterctl
// inventory, or when that is absent or empty, cluster-api-operator's
// provider objects.
func InstalledProviders(ctx context.Context, c client.Client) ([]Provider, error) {
	out, err := clusterctlProviders(ctx, c)
	if err != nil || len(out) > 0 {
		return out, err
	}
	return operatorProviders(ctx, c)
}

func clusterctlProviders(ctx context.Context, c client.Reader) ([]Provider, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(clusterctlProviderGVK)
	if err := c.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing clusterctl's inventory (Providers): %w", err)
	}
	out := make([]Provider, 0, len(list.Items))
	for _, p := range list.Items {
		typ, _, _ := unstructured.NestedString(p.Object, "type")
		name, _, _ := unstructured.NestedString(p.Object, "providerName")
		v, _, _ := unstructured.NestedString(p.Object, "version")
		out = append(out, Provider{Type: typ, Name: name, Version: v, Inventory: ClusterctlInventory})
	}
	return out, nil
}

// operatorProviders lists cluster-api-operator's provider objects of every
// kind installed, at the version the API server prefers for it.
func operatorProviders(ctx context.Context, c client.Client) ([]Provider, error) {
	var out []Provider
	for _, kind := range OperatorKinds {
		mapping, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: OperatorGroup, Kind: kind})
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue // cluster-api-operator is not installed, or not this kind
			}
			return nil, fmt.Errorf("looking up %s.%s: %w", kind, OperatorGroup, err)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(kind + "List"))
		if err := c.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("listing cluster-api-operator's %ss: %w", kind, err)
		}
		for _, p := range list.Items {
			// What cluster-api-operator has installed, not what it is asked
			// to install (spec.version): the same version it records when
			// it hands the provider to clusterctl's library.
			v, _, _ := unstructured.NestedString(p.Object, "status", "installedVersion")
			out = append(out, Provider{Type: kind, Name: p.GetName(), Version: v, Inventory: OperatorInventory})
		}
	}
	return out, nil
}

// CompareProviders applies clusterctl move's rule (cmd/clusterctl's
// checkTargetProviders): every provider of the source, identified by type
// and name, must be installed in the target, and the newest version
// installed there must be at least the source's. A newer target passes; an
// older one, or one whose version is unknown, does not. Versions are
// semantic versions ("v1.14.2").
func CompareProviders(source, target []Provider) error {
	var problems []string
	for _, sp := range source {
		sourceVersion, err := parseVersion(sp)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s in the source: %v", sp, err))
			continue
		}
		var newest *version.Version
		var newestRaw string
		var unknown []string
		for _, tp := range target {
			if tp.Type != sp.Type || tp.Name != sp.Name {
				continue
			}
			tv, err := parseVersion(tp)
			if err != nil {
				unknown = append(unknown, err.Error())
				continue
			}
			if newest == nil || newest.LessThan(tv) {
				newest, newestRaw = tv, tp.Version
			}
		}
		switch {
		case newest == nil && len(unknown) > 0:
			problems = append(problems, fmt.Sprintf("%s in the target: %s", sp, strings.Join(unknown, ", ")))
		case newest == nil:
			problems = append(problems, fmt.Sprintf("%s (%s in the source) is not installed in the target", sp, sp.Version))
		case !newest.AtLeast(sourceVersion):
			problems = append(problems, fmt.Sprintf("%s is older in the target (%s) than in the source (%s)", sp, newestRaw, sp.Version))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return &ProviderMismatch{Problems: problems}
}

func parseVersion(p Provider) (*version.Version, error) {
	if p.Version == "" {
		if p.Inventory == OperatorInventory {
			return nil, fmt.Errorf("no status.installedVersion: cluster-api-operator has not finished installing it")
		}
		return nil, fmt.Errorf("no version in the %s", p.Inventory)
	}
	v, err := version.ParseSemantic(p.Version)
	if err != nil {
		return nil, fmt.Errorf("version %q in the %s is not a semantic version", p.Version, p.Inventory)
	}
	return v, nil
}
