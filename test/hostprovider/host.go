package hostprovider

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/access"
)

// GroupVersion is the API group and version of BareMetalHost.
var GroupVersion = schema.GroupVersion{Group: "metal3.io", Version: "v1alpha1"}

// Names of the kind.
const (
	Kind     = "BareMetalHost"
	Resource = "baremetalhosts"
	// CRDName is the name of the CustomResourceDefinition.
	CRDName = "baremetalhosts.metal3.io"
	// OperatorRoleName names the ClusterRole that gives the operator what
	// a move needs on BareMetalHosts.
	OperatorRoleName = "move-operator-metal3"
)

// StateProvisioned is status.provisioning.state of a host whose image is
// written for its consumer.
const StateProvisioned = "provisioned"

// ConsumerRef names the object a host is provisioned for.
type ConsumerRef struct {
	APIVersion, Kind, Namespace, Name string
}

// NewHost returns a BareMetalHost to create: online, to be provisioned
// with image for consumer, without status (the controller writes it).
func NewHost(namespace, name string, consumer ConsumerRef, image string) *unstructured.Unstructured {
	h := newHost()
	h.SetNamespace(namespace)
	h.SetName(name)
	h.Object["spec"] = map[string]any{
		"online": true,
		"image":  image,
		"consumerRef": map[string]any{
			"apiVersion": consumer.APIVersion,
			"kind":       consumer.Kind,
			"namespace":  consumer.Namespace,
			"name":       consumer.Name,
		},
	}
	return h
}

// NewList returns an empty BareMetalHost list to read into.
func NewList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(GroupVersion.WithKind(Kind + "List"))
	return l
}

func newHost() *unstructured.Unstructured {
	h := &unstructured.Unstructured{}
	h.SetGroupVersionKind(GroupVersion.WithKind(Kind))
	return h
}

// ProvisioningState is a host's status.provisioning.state, "" when it has
// none.
func ProvisioningState(host *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(host.Object, "status", "provisioning", "state")
	return s
}

// ProvisionedForUID is the UID of the consumer a host's status says it was
// provisioned for, "" when it has none.
func ProvisionedForUID(host *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(host.Object, "status", "consumerRef", "uid")
	return s
}

// specConsumer is the consumer a host is asked to be provisioned for; ok
// is false when it has none. A consumer without a namespace is in the
// host's.
func specConsumer(host *unstructured.Unstructured) (ref ConsumerRef, ok bool) {
	m, found, _ := unstructured.NestedStringMap(host.Object, "spec", "consumerRef")
	if !found || m["name"] == "" || m["kind"] == "" {
		return ConsumerRef{}, false
	}
	ref = ConsumerRef{APIVersion: m["apiVersion"], Kind: m["kind"], Namespace: m["namespace"], Name: m["name"]}
	if ref.Namespace == "" {
		ref.Namespace = host.GetNamespace()
	}
	return ref, true
}

// CRD is the BareMetalHost CustomResourceDefinition, labelled for
// clusterctl (and so for the operator) to move every host on its own.
func CRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	boolean := apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	object := func(description string, props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Description: description, Properties: props}
	}
	ref := map[string]apiextensionsv1.JSONSchemaProps{"apiVersion": str, "kind": str, "namespace": str, "name": str}
	statusRef := map[string]apiextensionsv1.JSONSchemaProps{"apiVersion": str, "kind": str, "namespace": str, "name": str, "uid": str}
	schema := object("BareMetalHost is a bare-metal host, provisioned with an image for its consumer.", map[string]apiextensionsv1.JSONSchemaProps{
		"apiVersion": str,
		"kind":       str,
		"metadata":   {Type: "object"},
		"spec": object("spec is the host asked for.", map[string]apiextensionsv1.JSONSchemaProps{
			"online":      boolean,
			"image":       str,
			"consumerRef": object("consumerRef names the object the host is provisioned for.", ref),
		}),
		"status": object("status is what the host holds: only the controller knows it, the hardware cannot tell it again.", map[string]apiextensionsv1.JSONSchemaProps{
			"provisioning": object("provisioning is the state of the host's disk.", map[string]apiextensionsv1.JSONSchemaProps{
				"state": str,
				"image": str,
			}),
			"consumerRef": object("consumerRef is the consumer the host was provisioned for, with its UID.", statusRef),
			"poweredOn":   boolean,
		}),
	})
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   CRDName,
			Labels: map[string]string{clusterctlv1.ClusterctlLabel: "", clusterctlv1.ClusterctlMoveLabel: ""},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: GroupVersion.Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: Resource, Singular: "baremetalhost", Kind: Kind, ListKind: Kind + "List", ShortNames: []string{"bmh", "bmhost"},
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: GroupVersion.Version, Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &schema},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "State", Type: "string", JSONPath: ".status.provisioning.state"},
					{Name: "Consumer", Type: "string", JSONPath: ".spec.consumerRef.name"},
					{Name: "Online", Type: "boolean", JSONPath: ".spec.online"},
					{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
				},
			}},
		},
	}
}

// OperatorRole is the ClusterRole a Metal3 user applies, following
// docs/access.md, for the operator to move BareMetalHosts: labelled for
// aggregation into the operator's role in the cluster. It holds the
// target's verbs, a superset of the source's, so that the same role serves
// a move in either direction between two clusters.
func OperatorRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   OperatorRoleName,
			Labels: map[string]string{access.AggregationLabel: "true"},
		},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{GroupVersion.Group}, Resources: []string{Resource}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
			{APIGroups: []string{GroupVersion.Group}, Resources: []string{Resource + "/status"}, Verbs: []string{"patch"}},
		},
	}
}

// CheckProvisioned reads the hosts of namespaces through c and returns how
// many there are, and an error naming the first whose status does not say
// it is provisioned for its consumer as c holds it: the UID must be that
// of the consumer in c's cluster, so a host moved with its consumer's old
// UID is not provisioned for it.
func CheckProvisioned(ctx context.Context, c client.Reader, namespaces []string) (int, error) {
	n := 0
	for _, ns := range namespaces {
		hosts := NewList()
		if err := c.List(ctx, hosts, client.InNamespace(ns)); err != nil {
			return n, fmt.Errorf("listing BareMetalHosts in %s: %w", ns, err)
		}
		for i := range hosts.Items {
			n++
			host := &hosts.Items[i]
			key := client.ObjectKeyFromObject(host)
			ref, ok := specConsumer(host)
			if !ok {
				return n, fmt.Errorf("BareMetalHost %s has no consumer", key)
			}
			consumer := &unstructured.Unstructured{}
			consumer.SetAPIVersion(ref.APIVersion)
			consumer.SetKind(ref.Kind)
			if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, consumer); err != nil {
				return n, fmt.Errorf("reading %s %s/%s, the consumer of BareMetalHost %s: %w", ref.Kind, ref.Namespace, ref.Name, key, err)
			}
			if !provisionedFor(host, string(consumer.GetUID())) {
				return n, fmt.Errorf("BareMetalHost %s is %q for consumer UID %q, not %q for %s %s's UID %q",
					key, ProvisioningState(host), ProvisionedForUID(host), StateProvisioned, ref.Kind, ref.Name, consumer.GetUID())
			}
		}
	}
	return n, nil
}
