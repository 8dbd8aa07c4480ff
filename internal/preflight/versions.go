package preflight

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/convert"
	"github.com/move-operator/move-operator/internal/graph"
)

// KindVersion is what a move does about the versions one kind is stored
// at: in the source, in the target, and how its objects get from the one to
// the other. Objects are read and written at the storage version only, so
// that no conversion webhook is ever asked (those of the providers the move
// stops); a version that differs is converted in the operator, or not at all.
type KindVersion struct {
	GroupKind schema.GroupKind
	// Resource is the plural resource name, for messages.
	Resource string
	// Provider is the provider that installed the kind in the source, by
	// the label clusterctl gives its CRD (graph.ProviderLabel:
	// "cluster-api", "bootstrap-kubeadm"); empty when unlabelled.
	Provider string
	// Source is the version the source stores the kind at; Target the
	// target's, empty when the target does not serve the kind.
	Source, Target string
	// Conversion is how the kind's objects reach the target's version.
	Conversion Conversion
	// Refusal says why the target cannot take the kind; empty when it can.
	Refusal Refusal
	// Message says, for a refusal, why by name and what to install or do;
	// for a conversion, what converts it.
	Message string
}

// Conversion is how objects of a kind reach the version the target stores
// it at: the status words of status.plan.versions.
type Conversion = movev1alpha1.KindConversion

const (
	// ConversionNone: both clusters store the kind at the same version.
	ConversionNone = movev1alpha1.ConversionNone
	// ConversionToNewer: the target stores a newer version, and the
	// operator converts each object with Cluster API's own code (package
	// convert): an older Cluster API moved into a newer one.
	ConversionToNewer = movev1alpha1.ConversionToNewer
	// ConversionToOlder: the target stores an older version, and the
	// operator converts each object back with Cluster API's code (a newer
	// Cluster API moved back into an older one). Validating first refuses,
	// by kind, object and field, every object holding in its spec or
	// metadata what the older version cannot hold (CheckGoingBack, with
	// convert.Lost), so that the older release's controllers act on
	// everything the objects say.
	ConversionToOlder = movev1alpha1.ConversionToOlder
)

// Refusal is why a target cannot take a kind.
type Refusal = movev1alpha1.KindRefusal

const (
	// RefusalNotInTarget: the target does not serve the kind at all.
	RefusalNotInTarget = movev1alpha1.RefusalNotInTarget
	// RefusalOlderInTarget: the target stores an older version than the
	// source, and the operator does not convert to it: a provider's kind
	// (it converts only in its provider), or versions Cluster API's code
	// does not convert. Cluster API's own kinds between versions its code
	// converts go back (ConversionToOlder).
	RefusalOlderInTarget = movev1alpha1.RefusalOlderInTarget
	// RefusalNewerInTarget: the target stores a newer version than the
	// source, and the operator has no conversion between them.
	RefusalNewerInTarget = movev1alpha1.RefusalNewerInTarget
	// RefusalStoredAtOtherVersions: a cluster still has objects of the
	// kind stored at a version besides its storage version; reading them
	// at the storage version needs that cluster's conversion webhook.
	RefusalStoredAtOtherVersions = movev1alpha1.RefusalStoredAtOtherVersions
)

// KindVersions lists, for every kind the source stores that a move
// considers (not Secrets and ConfigMaps), the version each cluster stores
// it at and how its objects get across; and for each kind the target
// cannot take, why by name and what to do. Sorted by kind.
//
// It is the comparison CheckCRDs makes, but for a difference of versions
// that Cluster API's own conversion code (package convert) bridges: a kind
// of Cluster API's core or kubeadm providers stored at v1beta1 in one
// cluster and v1beta2 in the other converts in the operator, either way;
// a provider's kind converts only in its provider, so it must be stored at
// one version in both clusters.
func KindVersions(source, target *graph.Types) []KindVersion {
	var out []KindVersion
	for _, st := range source.All() {
		if st.GVK.Group == "" {
			continue // Secrets and ConfigMaps
		}
		gk := st.GVK.GroupKind()
		kv := KindVersion{GroupKind: gk, Resource: st.Resource, Provider: st.Provider, Source: st.GVK.Version}
		tt, ok := target.Lookup(gk)
		if !ok {
			kv.Refusal = RefusalNotInTarget
			kv.Message = fmt.Sprintf("%s (%s) is not served by the target: install there the provider that serves it, at the version the source runs or a newer one",
				st.Resource, graph.KindString(gk))
			out = append(out, kv)
			continue
		}
		kv.Target = tt.GVK.Version
		kv.Conversion, kv.Refusal, kv.Message = bridge(st, tt)
		if msg := storedElsewhere(st, tt); msg != "" {
			if kv.Refusal == "" {
				kv.Refusal, kv.Message = RefusalStoredAtOtherVersions, msg
			} else {
				kv.Message += "; " + msg
			}
		}
		out = append(out, kv)
	}
	return out
}

// bridge says how objects of a kind get from the source's version to the
// target's, or why they cannot.
func bridge(st, tt *graph.Type) (Conversion, Refusal, string) {
	gk := st.GVK.GroupKind()
	from, to := st.GVK.Version, tt.GVK.Version
	if from == to {
		return ConversionNone, "", ""
	}
	older := version.CompareKubeAwareVersionStrings(to, from) < 0
	if convert.Supports(gk, from, to) {
		if older {
			// What the objects hold is checked once they are read
			// (CheckGoingBack): the kind goes back, its objects may not.
			return ConversionToOlder, "", fmt.Sprintf("%s is stored at %s in the source and at the older %s in the target: the operator converts each object back with Cluster API's own code, and refuses the move if one holds what %s cannot",
				st.Resource, from, to, to)
		}
		return ConversionToNewer, "", fmt.Sprintf("%s is stored at %s in the source and %s in the target: the operator converts each object with Cluster API's own code",
			st.Resource, from, to)
	}
	why := fmt.Sprintf("a provider's kinds convert only in that provider, and the operator has no conversion of %s", graph.KindString(gk))
	if versions, _ := convert.Versions(gk); len(versions) > 0 {
		why = fmt.Sprintf("Cluster API's code in the operator converts %s only between %s", graph.KindString(gk), strings.Join(versions, ", "))
	}
	if older {
		return "", RefusalOlderInTarget, fmt.Sprintf("%s is stored at %s in the source but only at the older %s in the target, and %s: install in the target the provider version the source runs (or a newer one)",
			st.Resource, from, to, why)
	}
	return "", RefusalNewerInTarget, fmt.Sprintf("%s is stored at %s in the source and at the newer %s in the target, and %s: upgrade the provider in the source in place first (clusterctl upgrade), or install in the target the version the source runs",
		st.Resource, from, to, why)
}

// storedElsewhere says which cluster still has objects of a kind stored at
// another version than its storage version, and what to do; empty when
// neither has.
func storedElsewhere(st, tt *graph.Type) string {
	var problems []string
	for _, c := range []struct {
		which string
		t     *graph.Type
	}{{"source", st}, {"target", tt}} {
		if extra := otherVersions(c.t); len(extra) > 0 {
			problems = append(problems, fmt.Sprintf("%s in the %s still has objects stored at %s besides %s: migrate them to the storage version and trim status.storedVersions first",
				c.t.Resource, c.which, strings.Join(extra, ", "), c.t.GVK.Version))
		}
	}
	return strings.Join(problems, "; ")
}

// CheckKindVersions fails, naming every kind concerned, when the target
// cannot take a kind to move (see KindVersions): the error CheckCRDs
// returns, but for the version differences the operator converts.
func CheckKindVersions(source, target *graph.Types) error {
	return Refusals(KindVersions(source, target))
}

// Refusals fails, naming every kind concerned, when one of kvs is refused:
// CheckKindVersions' error, for versions computed already.
func Refusals(kvs []KindVersion) error {
	var problems []string
	for _, kv := range kvs {
		if kv.Refusal != "" {
			problems = append(problems, kv.Message)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the CRDs do not allow a move: %s", strings.Join(problems, "; "))
}

// TargetVersions returns, for the kinds of kvs that the target stores at
// another version than the source and that the move converts, the
// target's version: what graph.Plan.SetTargetVersions records.
func TargetVersions(kvs []KindVersion) map[schema.GroupKind]string {
	out := map[schema.GroupKind]string{}
	for _, kv := range kvs {
		if kv.Refusal == "" && kv.Target != "" && kv.Target != kv.Source {
			out[kv.GroupKind] = kv.Target
		}
	}
	return out
}

// StatusOf is kvs as status.plan.versions lists them.
func StatusOf(kvs []KindVersion) []movev1alpha1.KindVersion {
	out := make([]movev1alpha1.KindVersion, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, movev1alpha1.KindVersion{
			Kind: graph.KindString(kv.GroupKind), Source: kv.Source, Target: kv.Target,
			Conversion: kv.Conversion, Refusal: kv.Refusal,
		})
	}
	return out
}
