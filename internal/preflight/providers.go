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

	"github.com/move-operator/move-operator/internal/graph"
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
// older there, but for those older that older accepts (see
// CompareProviders). The providers of a cluster are those of its clusterctl
// inventory; a cluster without one (providers installed by
// cluster-api-operator, which keeps none) is read from cluster-api-operator's
// provider objects instead. A source with neither is not checked.
func CheckProviders(ctx context.Context, source, target client.Client, older OlderProvider) error {
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
	return CompareProviders(src, tgt, older)
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

// OlderProvider decides whether the target may run an older version of a
// provider of the source than the source runs: accepted, or why not beyond
// the versions (empty when there is nothing more to say). nil accepts none.
type OlderProvider func(p Provider) (accepted bool, why string)

// CompareProviders applies clusterctl move's rule (cmd/clusterctl's
// checkTargetProviders): every provider of the source, identified by type
// and name, must be installed in the target, and the newest version
// installed there must be at least the source's. A newer target passes; one
// whose version is unknown does not; an older one passes only when older
// accepts it (OlderClusterAPI: one of Cluster API's own providers whose
// every kind the move converts back to the older version the target stores
// it at), and is otherwise named with older's reason. Versions are semantic
// versions ("v1.14.2").
func CompareProviders(source, target []Provider, older OlderProvider) error {
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
			var accepted bool
			var why string
			if older != nil {
				accepted, why = older(sp)
			}
			if accepted {
				continue
			}
			problem := fmt.Sprintf("%s is older in the target (%s) than in the source (%s)", sp, newestRaw, sp.Version)
			if why != "" {
				problem += ": " + why
			}
			problems = append(problems, problem)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return &ProviderMismatch{Problems: problems}
}

// clusterAPIProviders are Cluster API's own providers, whose kinds the
// operator converts with Cluster API's code (package convert), each with
// the label clusterctl gives its CRDs (graph.ProviderLabel).
var clusterAPIProviders = map[Provider]string{
	{Type: "CoreProvider", Name: "cluster-api"}:     "cluster-api",
	{Type: "BootstrapProvider", Name: "kubeadm"}:    "bootstrap-kubeadm",
	{Type: "ControlPlaneProvider", Name: "kubeadm"}: "control-plane-kubeadm",
}

// maxKindsNamed bounds the kinds a provider's problem names.
const maxKindsNamed = 3

// joinKinds names the first maxKindsNamed of kinds, and says how many more
// there are.
func joinKinds(kinds []string) string {
	return strings.Join(firstOf(kinds, maxKindsNamed, "kinds"), ", ")
}

// OlderClusterAPI is the OlderProvider of a move whose kinds go across as
// kvs say: it accepts an older version in the target of one of Cluster
// API's own providers (core, kubeadm bootstrap, kubeadm control plane) when
// every kind of that provider the move carries (its CRDs labelled for it in
// the source) goes back to an older version the operator converts to
// (ConversionToOlder): the objects are then written in the older release's
// API, converted by Cluster API's code, and what that API cannot hold is
// refused by object and field (CheckGoingBack, against the target's CRDs).
//
// Everything else older in the target is refused, as clusterctl refuses
// it: a provider's kinds convert only in the provider; and a kind of
// Cluster API stored at one version in both clusters would be written as
// the newer release wrote it, checked against nothing, for controllers of
// an older release of that version that may not know its newer fields
// (a v1.14.0 target of a v1.14.2 source converts nothing at all).
func OlderClusterAPI(kvs []KindVersion) OlderProvider {
	return func(p Provider) (bool, string) {
		label, ok := clusterAPIProviders[Provider{Type: p.Type, Name: p.Name}]
		if !ok {
			return false, ""
		}
		// The kinds stored at one version in both clusters, and those that
		// do not go across as a move back takes them, with why.
		var same, other []string
		carried := 0
		for _, kv := range kvs {
			if kv.Provider != label {
				continue
			}
			carried++
			kind := graph.KindString(kv.GroupKind)
			switch {
			case kv.Refusal != "":
				other = append(other, fmt.Sprintf("%s cannot go across at all (%s)", kind, kv.Refusal))
			case kv.Conversion == ConversionNone:
				same = append(same, kind)
			case kv.Conversion != ConversionToOlder:
				other = append(other, fmt.Sprintf("%s goes to the newer %s", kind, kv.Target))
			}
		}
		const rule = "Cluster API's own providers may be older in the target only when the move converts each of their kinds back to the older version the target stores it at"
		if carried == 0 {
			return false, fmt.Sprintf("%s, and the source has no kind labelled %s=%s", rule, graph.ProviderLabel, label)
		}
		var stops []string
		if len(same) > 0 {
			stops = append(stops, fmt.Sprintf("it does not convert %s, stored at one version in both clusters (where an older release's controllers may not know the fields a newer one writes)",
				joinKinds(same)))
		}
		if len(other) > 0 {
			stops = append(stops, joinKinds(other))
		}
		if len(stops) > 0 {
			return false, fmt.Sprintf("%s, and %s", rule, strings.Join(stops, "; "))
		}
		return true, ""
	}
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
