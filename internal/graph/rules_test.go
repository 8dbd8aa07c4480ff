package graph

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// before asserts that every "owner" object is created in an earlier group
// than its dependent.
type before struct{ owner, dependent *unstructured.Unstructured }

func checkOrder(t *testing.T, p *Plan, pairs []before) {
	t.Helper()
	for _, pair := range pairs {
		o, d := groupIndex(p, pair.owner), groupIndex(p, pair.dependent)
		if o < 0 || d < 0 {
			t.Errorf("%s (group %d) and %s (group %d): both should move", nameOf(pair.owner), o, nameOf(pair.dependent), d)
			continue
		}
		if o >= d {
			t.Errorf("%s is in group %d, not before %s in group %d", nameOf(pair.owner), o, nameOf(pair.dependent), d)
		}
	}
}

func TestOwnerReferenceEdges(t *testing.T) {
	cluster := obj(gvkCluster, "ns1", "c1")
	infra := obj(gvkInfraCluster, "ns1", "c1", ownedBy(cluster, true))
	kcp := obj(gvkKCP, "ns1", "c1-cp", ownedBy(cluster, true))
	twoOwners := obj(gvkInfraMachineTmpl, "ns1", "shared", ownedBy(cluster, false), ownedBy(kcp, false))
	oldVersionOwner := obj(gvkMachine, "ns1", "m1", ownedBy(kcp, true))
	ownedAtOldVersion := obj(gvkKubeadmConfig, "ns1", "m1", ownedByRef(gvkOldMachineVersion, "m1", oldVersionOwner.GetUID()))

	tests := []struct {
		name  string
		objs  []*unstructured.Unstructured
		order []before
	}{
		{
			name:  "an object is created after its owner",
			objs:  objects([]*unstructured.Unstructured{cluster, infra}),
			order: []before{{cluster, infra}},
		},
		{
			name:  "an object is created after every one of its owners",
			objs:  objects([]*unstructured.Unstructured{cluster, kcp, twoOwners}),
			order: []before{{cluster, kcp}, {cluster, twoOwners}, {kcp, twoOwners}},
		},
		{
			name:  "the order the objects are read in does not matter",
			objs:  objects([]*unstructured.Unstructured{twoOwners, kcp, infra, cluster}),
			order: []before{{cluster, infra}, {cluster, kcp}, {kcp, twoOwners}},
		},
		{
			name:  "an owner reference at another API version than the storage version finds its owner by UID",
			objs:  objects([]*unstructured.Unstructured{cluster, kcp, oldVersionOwner, ownedAtOldVersion}),
			order: []before{{kcp, oldVersionOwner}, {oldVersionOwner, ownedAtOldVersion}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, nil, tt.objs...).Plan(Selection{})
			if diff := cmp.Diff(namesOf(tt.objs), moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			checkOrder(t, p, tt.order)
			if err := p.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}

	t.Run("every object of a provisioned Cluster comes after each of its owners", func(t *testing.T) {
		objs := fleetCluster("ns1", "c1")
		g := build(t, nil, objs...)
		p := g.Plan(Selection{})
		if diff := cmp.Diff(namesOf(objs), moved(p)); diff != "" {
			t.Errorf("moved objects differ (-want +got):\n%s", diff)
		}
		for _, o := range objs {
			for _, ref := range o.GetOwnerReferences() {
				owner, _ := p.Object(ref.UID)
				self, _ := p.Object(o.GetUID())
				if owner == nil || self == nil || owner.Group >= self.Group {
					t.Errorf("%s is not created after its owner %s %s", nameOf(o), ref.Kind, ref.Name)
				}
			}
		}
	})
}

func TestClusterSecretsBelongToTheirClusterByName(t *testing.T) {
	tests := []struct {
		name     string
		clusters []string
		secret   *unstructured.Unstructured
		// owner is the Cluster the Secret belongs to, "" when it does not move.
		owner string
	}{
		{name: "a kubeconfig Secret without owner belongs to its Cluster", clusters: []string{"c1"}, secret: obj(gvkSecret, "ns1", "c1-kubeconfig"), owner: "c1"},
		{name: "a ca Secret without owner belongs to its Cluster", clusters: []string{"c1"}, secret: obj(gvkSecret, "ns1", "c1-ca"), owner: "c1"},
		{name: "an etcd Secret without owner belongs to its Cluster", clusters: []string{"c1"}, secret: obj(gvkSecret, "ns1", "c1-etcd"), owner: "c1"},
		{name: "an sa Secret without owner belongs to its Cluster", clusters: []string{"c1"}, secret: obj(gvkSecret, "ns1", "c1-sa"), owner: "c1"},
		{name: "a proxy Secret without owner belongs to its Cluster", clusters: []string{"c1"}, secret: obj(gvkSecret, "ns1", "c1-proxy"), owner: "c1"},
		{
			name:     "an apiserver-etcd-client Secret belongs to its Cluster, not to a Cluster named after the first dash",
			clusters: []string{"c1", "c1-apiserver-etcd"},
			secret:   obj(gvkSecret, "ns1", "c1-apiserver-etcd-client"),
			owner:    "c1",
		},
		{
			name:     "an apiserver-etcd-client Secret belongs to a Cluster whose own name ends like a purpose",
			clusters: []string{"db-etcd"},
			secret:   obj(gvkSecret, "ns1", "db-etcd-apiserver-etcd-client"),
			owner:    "db-etcd",
		},
		{
			name:     "a ca Secret of a Cluster named like an etcd Secret belongs to that Cluster",
			clusters: []string{"db", "db-etcd"},
			secret:   obj(gvkSecret, "ns1", "db-etcd-ca"),
			owner:    "db-etcd",
		},
		{
			name:     "a Secret with an owner reference is not claimed by its name",
			clusters: []string{"c1"},
			secret:   obj(gvkSecret, "ns1", "c1-ca", ownedByRef(gvkDeployment, "web", "uid-web")),
		},
		{
			name:     "a Secret in another namespace than the Cluster is not claimed",
			clusters: []string{"c1"},
			secret:   obj(gvkSecret, "ns2", "c1-kubeconfig"),
		},
		{
			name:     "a Secret with a suffix that is not a cluster Secret purpose is not claimed",
			clusters: []string{"c1"},
			secret:   obj(gvkSecret, "ns1", "c1-credentials"),
		},
		{
			name:     "a Secret named after a Cluster that does not exist is not claimed",
			clusters: []string{"c1"},
			secret:   obj(gvkSecret, "ns1", "c2-kubeconfig"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []*unstructured.Unstructured{tt.secret}
			for _, c := range tt.clusters {
				objs = append(objs, obj(gvkCluster, "ns1", c))
			}
			p := build(t, nil, objs...).Plan(Selection{})
			g := groupIndex(p, tt.secret)
			if tt.owner == "" {
				if g >= 0 {
					t.Fatalf("%s moves, want it left alone", nameOf(tt.secret))
				}
				if e, ok := exclusionOf(p, tt.secret); !ok || e.Blocking {
					t.Errorf("%s: exclusion %+v, want a non-blocking one", nameOf(tt.secret), e)
				}
				return
			}
			checkOrder(t, p, []before{{obj(gvkCluster, "ns1", tt.owner), tt.secret}})
			// The Secret belongs to that Cluster alone: it is in no other
			// Cluster's hierarchy.
			g2 := build(t, nil, objs...)
			g2.link()
			n := g2.nodes[tt.secret.GetUID()]
			var owners []string
			for _, o := range n.softOwners {
				owners = append(owners, o.ref.Name)
			}
			if diff := cmp.Diff([]string{tt.owner}, owners); diff != "" {
				t.Errorf("soft owners differ (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClusterClassOwnsItsClustersAndTemplates(t *testing.T) {
	class := obj(gvkClusterClass, "ns1", "cc", classTemplates("infra", "cp", "worker", "worker"))
	infraTmpl := obj(gvkInfraClusterTmpl, "ns1", "infra", ownedBy(class, false))
	cpTmpl := obj(gvkKCPTemplate, "ns1", "cp", ownedBy(class, false))
	workerTmpl := obj(gvkInfraMachineTmpl, "ns1", "worker") // no owner reference yet
	bootstrapTmpl := obj(gvkKubeadmConfigTmpl, "ns1", "worker")
	user := obj(gvkCluster, "ns1", "c1", topology("cc", ""))
	v1beta1User := obj(gvkCluster, "ns1", "c2", field("cc", "spec", "topology", "class"))

	// A ClusterClass in another namespace than the moved one, read by
	// discovery because a moved Cluster uses it.
	sharedClass := obj(gvkClusterClass, "classes", "shared", classTemplates("infra", "cp", "worker", "worker"))
	sharedTmpls := []*unstructured.Unstructured{
		obj(gvkInfraClusterTmpl, "classes", "infra", ownedBy(sharedClass, false)),
		obj(gvkKCPTemplate, "classes", "cp", ownedBy(sharedClass, false)),
		obj(gvkInfraMachineTmpl, "classes", "worker", ownedBy(sharedClass, false)),
		obj(gvkKubeadmConfigTmpl, "classes", "worker", ownedBy(sharedClass, false)),
	}
	crossUser := obj(gvkCluster, "ns1", "c3", topology("shared", "classes"))

	tests := []struct {
		name       string
		namespaces []string
		objs       []*unstructured.Unstructured
		order      []before
		wantMoved  []string
		wantKept   []string
		wantWarn   string
	}{
		{
			name:      "a Cluster is created after the ClusterClass it uses, which is created before its templates",
			objs:      []*unstructured.Unstructured{class, infraTmpl, cpTmpl, workerTmpl, bootstrapTmpl, user},
			order:     []before{{class, user}, {class, infraTmpl}, {class, workerTmpl}},
			wantMoved: names(class, infraTmpl, cpTmpl, workerTmpl, bootstrapTmpl, user),
		},
		{
			name:      "a Cluster naming its class with the v1beta1 fields is created after it",
			objs:      []*unstructured.Unstructured{class, v1beta1User},
			order:     []before{{class, v1beta1User}},
			wantMoved: names(class, v1beta1User),
		},
		{
			name:      "templates a ClusterClass references move with it even before it owns them",
			objs:      []*unstructured.Unstructured{class, workerTmpl, bootstrapTmpl},
			order:     []before{{class, workerTmpl}, {class, bootstrapTmpl}},
			wantMoved: names(class, workerTmpl, bootstrapTmpl),
			wantWarn:  "references TestClusterTemplate.infrastructure.cluster.x-k8s.io ns1/infra, which does not exist",
		},
		{
			name:       "a ClusterClass in another namespace moves with its templates before the Cluster, and stays in the source",
			namespaces: []string{"ns1"},
			objs:       append([]*unstructured.Unstructured{sharedClass, crossUser}, sharedTmpls...),
			order:      []before{{sharedClass, crossUser}, {sharedClass, sharedTmpls[0]}},
			wantMoved:  namesOf(append([]*unstructured.Unstructured{sharedClass, crossUser}, sharedTmpls...)),
			wantKept:   namesOf(append([]*unstructured.Unstructured{sharedClass}, sharedTmpls...)),
		},
		{
			name:      "a Cluster whose ClusterClass does not exist moves with a warning",
			objs:      []*unstructured.Unstructured{crossUser},
			wantMoved: names(crossUser),
			wantWarn:  "Cluster.cluster.x-k8s.io ns1/c3 uses ClusterClass.cluster.x-k8s.io classes/shared, which does not exist",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, tt.namespaces, tt.objs...).Plan(Selection{})
			if diff := cmp.Diff(tt.wantMoved, moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantKept, kept(p)); diff != "" {
				t.Errorf("objects kept in the source differ (-want +got):\n%s", diff)
			}
			checkOrder(t, p, tt.order)
			if tt.wantWarn != "" && !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, tt.wantWarn) }) {
				t.Errorf("warnings %q do not mention %q", p.Warnings, tt.wantWarn)
			}
		})
	}
}

func TestClusterResourceSetBindingBelongsToItsCluster(t *testing.T) {
	crs := obj(gvkCRS, "ns1", "addons")
	cm := obj(gvkConfigMap, "ns1", "addons-cm", ownedBy(crs, false))
	secret := obj(gvkSecret, "ns1", "addons-secret", ownedBy(crs, false))
	cluster := obj(gvkCluster, "ns1", "c1")
	binding := obj(gvkCRSBinding, "ns1", "c1", ownedBy(crs, false), field("c1", "spec", "clusterName"))
	lonelyBinding := obj(gvkCRSBinding, "ns1", "gone", ownedBy(crs, false), field("gone", "spec", "clusterName"))

	tests := []struct {
		name  string
		objs  []*unstructured.Unstructured
		order []before
	}{
		{
			name:  "a binding is created after both its ClusterResourceSet and its Cluster",
			objs:  []*unstructured.Unstructured{crs, cm, secret, cluster, binding},
			order: []before{{crs, binding}, {cluster, binding}, {crs, cm}, {crs, secret}},
		},
		{
			name:  "a binding to a Cluster that no longer exists still moves with its ClusterResourceSet",
			objs:  []*unstructured.Unstructured{crs, lonelyBinding},
			order: []before{{crs, lonelyBinding}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, nil, tt.objs...).Plan(Selection{})
			if diff := cmp.Diff(namesOf(tt.objs), moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			checkOrder(t, p, tt.order)
		})
	}
}

func TestHierarchyRoots(t *testing.T) {
	identity := obj(gvkIdentity, "", "id")
	identitySecret := obj(gvkSecret, "infra-system", "id-credentials", ownedBy(identity, false))
	labelledRoot := obj(gvkConfigMap, "ns1", "root", label(MoveHierarchyLabel, ""))
	labelledChild := obj(gvkSecret, "ns1", "child", ownedBy(labelledRoot, false))
	labelledGrandchild := obj(gvkSecret, "ns1", "grandchild", ownedBy(labelledChild, false))
	crs := obj(gvkCRS, "ns1", "crs")
	crsResource := obj(gvkConfigMap, "ns1", "crs-cm", ownedBy(crs, false))
	class := obj(gvkClusterClass, "ns1", "cc")
	template := obj(gvkInfraMachineTmpl, "ns1", "tmpl", ownedBy(class, false))
	unowned := obj(gvkInfraMachineTmpl, "ns1", "unowned")
	unownedChild := obj(gvkSecret, "ns1", "unowned-child", ownedBy(unowned, false))

	tests := []struct {
		name      string
		objs      []*unstructured.Unstructured
		wantMoved []string
	}{
		{name: "a Cluster moves with its whole hierarchy", objs: fleetCluster("ns1", "c1"), wantMoved: namesOf(fleetCluster("ns1", "c1"))},
		{name: "a ClusterClass without Clusters moves with what it owns", objs: []*unstructured.Unstructured{class, template}, wantMoved: names(class, template)},
		{name: "a ClusterResourceSet without bindings moves with its resources", objs: []*unstructured.Unstructured{crs, crsResource}, wantMoved: names(crs, crsResource)},
		{
			name:      "an object of a CRD labelled move-hierarchy moves with its hierarchy",
			objs:      []*unstructured.Unstructured{identity, identitySecret},
			wantMoved: names(identity, identitySecret),
		},
		{
			name:      "an object labelled move-hierarchy moves with its hierarchy, however deep",
			objs:      []*unstructured.Unstructured{labelledRoot, labelledChild, labelledGrandchild},
			wantMoved: names(labelledRoot, labelledChild, labelledGrandchild),
		},
		{
			name: "an object no root owns does not move, nor does what it owns",
			objs: []*unstructured.Unstructured{unowned, unownedChild},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, nil, tt.objs...).Plan(Selection{})
			if diff := cmp.Diff(tt.wantMoved, moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			var wantExcluded []string
			for _, o := range tt.objs {
				if !slices.Contains(tt.wantMoved, nameOf(o)) {
					wantExcluded = append(wantExcluded, nameOf(o))
				}
			}
			slices.Sort(wantExcluded)
			if diff := cmp.Diff(wantExcluded, excluded(p, ExcludedNotInHierarchy)); diff != "" {
				t.Errorf("objects reported as outside any hierarchy differ (-want +got):\n%s", diff)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestMoveLabelForcesOneObject(t *testing.T) {
	forcedCM := obj(gvkConfigMap, "ns1", "cloud-config", label(MoveLabel, ""))
	forcedOwner := obj(gvkConfigMap, "ns1", "forced-owner", label(MoveLabel, "true"))
	notForcedChild := obj(gvkSecret, "ns1", "child", ownedBy(forcedOwner, false))
	widget := obj(gvkWidget, "ns1", "w1")
	otherWidget := obj(gvkWidget, "ns2", "w2")

	tests := []struct {
		name       string
		namespaces []string
		objs       []*unstructured.Unstructured
		wantMoved  []string
		wantKept   []string
	}{
		{
			name:      "an object labelled move moves, and is deleted from the source",
			objs:      []*unstructured.Unstructured{forcedCM},
			wantMoved: names(forcedCM),
		},
		{
			name:      "every object of a CRD labelled move moves",
			objs:      []*unstructured.Unstructured{widget, otherWidget},
			wantMoved: names(widget, otherWidget),
		},
		{
			name:       "an object labelled move outside the moved namespaces does not move",
			namespaces: []string{"ns1"},
			objs:       []*unstructured.Unstructured{widget, otherWidget},
			wantMoved:  names(widget),
		},
		{
			name:      "the move label moves only the object: what it owns stays, and so does it in the source",
			objs:      []*unstructured.Unstructured{forcedOwner, notForcedChild},
			wantMoved: names(forcedOwner),
			wantKept:  names(forcedOwner),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, tt.namespaces, tt.objs...).Plan(Selection{})
			if diff := cmp.Diff(tt.wantMoved, moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantKept, kept(p)); diff != "" {
				t.Errorf("objects kept in the source differ (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGlobalObjectsAreCopiedNeverDeleted(t *testing.T) {
	identity := obj(gvkIdentity, "", "id")
	secret := obj(gvkSecret, "infra-system", "id-credentials", ownedBy(identity, false))
	cluster := obj(gvkCluster, "ns1", "c1")
	infra := obj(gvkInfraCluster, "ns1", "c1", ownedBy(cluster, true))

	tests := []struct {
		name       string
		namespaces []string
		objs       []*unstructured.Unstructured
		wantMoved  []string
		wantKept   []string
	}{
		{
			name:      "a cluster-scoped object and the Secret it owns in a provider namespace are copied but not deleted",
			objs:      []*unstructured.Unstructured{identity, secret, cluster, infra},
			wantMoved: names(identity, secret, cluster, infra),
			wantKept:  names(identity, secret),
		},
		{
			name:       "a move of one namespace still copies global objects and their Secrets read from provider namespaces",
			namespaces: []string{"ns1"},
			objs:       []*unstructured.Unstructured{identity, secret, cluster, infra},
			wantMoved:  names(identity, secret, cluster, infra),
			wantKept:   names(identity, secret),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build(t, tt.namespaces, tt.objs...)
			g.MarkListed(SecretGroupKind, "infra-system")
			p := g.Plan(Selection{})
			if diff := cmp.Diff(tt.wantMoved, moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantKept, kept(p)); diff != "" {
				t.Errorf("objects kept in the source differ (-want +got):\n%s", diff)
			}
			o, _ := p.Object(identity.GetUID())
			if !o.Global || o.InGlobalHierarchy {
				t.Errorf("%s: global %t, in a global hierarchy %t; want global only", nameOf(identity), o.Global, o.InGlobalHierarchy)
			}
			o, _ = p.Object(secret.GetUID())
			if o.Global || !o.InGlobalHierarchy {
				t.Errorf("%s: global %t, in a global hierarchy %t; want in a global hierarchy only", nameOf(secret), o.Global, o.InGlobalHierarchy)
			}
			o, _ = p.Object(infra.GetUID())
			if o.Global || o.InGlobalHierarchy {
				t.Errorf("%s: global %t, in a global hierarchy %t; want neither", nameOf(infra), o.Global, o.InGlobalHierarchy)
			}
			if !slices.ContainsFunc(p.Warnings, func(w string) bool {
				return strings.Contains(w, "TestClusterIdentity.infrastructure.cluster.x-k8s.io id is copied but not deleted")
			}) {
				t.Errorf("warnings %q do not say the global object is copied but not deleted", p.Warnings)
			}
		})
	}
}

func TestClusterClassStillUsedIsCopiedNotDeleted(t *testing.T) {
	class := obj(gvkClusterClass, "ns1", "cc", classTemplates("infra", "cp", "worker", "worker"))
	tmpl := obj(gvkInfraMachineTmpl, "ns1", "worker", ownedBy(class, false))
	movedUser := obj(gvkCluster, "ns1", "moved", topology("cc", ""), label("env", "prod"))
	movedUserInfra := obj(gvkInfraCluster, "ns1", "moved", ownedBy(movedUser, true))
	otherNamespaceUser := obj(gvkCluster, "ns2", "stays", topology("cc", "ns1"))
	unselectedUser := obj(gvkCluster, "ns1", "unselected", topology("cc", ""), label("env", "dev"))

	tests := []struct {
		name       string
		namespaces []string
		selector   labels.Selector
		objs       []*unstructured.Unstructured
		wantMoved  []string
		wantKept   []string
	}{
		{
			name:       "a ClusterClass used by a Cluster of a namespace that does not move is copied, not deleted, with its templates",
			namespaces: []string{"ns1"},
			objs:       []*unstructured.Unstructured{class, tmpl, movedUser, movedUserInfra, otherNamespaceUser},
			wantMoved:  names(class, tmpl, movedUser, movedUserInfra),
			wantKept:   names(class, tmpl),
		},
		{
			name:      "a ClusterClass used by a Cluster the selector leaves out is copied, not deleted, with its templates",
			selector:  labels.SelectorFromSet(labels.Set{"env": "prod"}),
			objs:      []*unstructured.Unstructured{class, tmpl, movedUser, movedUserInfra, unselectedUser},
			wantMoved: names(class, tmpl, movedUser, movedUserInfra),
			wantKept:  names(class, tmpl),
		},
		{
			name:      "a ClusterClass used only by Clusters that move is deleted",
			objs:      []*unstructured.Unstructured{class, tmpl, movedUser, movedUserInfra, unselectedUser},
			wantMoved: names(class, tmpl, movedUser, movedUserInfra, unselectedUser),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, tt.namespaces, tt.objs...).Plan(Selection{ClusterSelector: tt.selector})
			if diff := cmp.Diff(tt.wantMoved, moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantKept, kept(p)); diff != "" {
				t.Errorf("objects kept in the source differ (-want +got):\n%s", diff)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestOwnershipCycles(t *testing.T) {
	cluster := obj(gvkCluster, "ns1", "c1")
	a := obj(gvkInfraMachine, "ns1", "a", ownedBy(cluster, false), ownedByRef(gvkInfraMachine, "b", uidOf(gvkInfraMachine, "ns1", "b")))
	b := obj(gvkInfraMachine, "ns1", "b", ownedBy(a, false))
	afterCycle := obj(gvkSecret, "ns1", "after", ownedBy(b, false))
	self := obj(gvkInfraMachine, "ns1", "self", ownedBy(cluster, false), ownedByRef(gvkInfraMachine, "self", uidOf(gvkInfraMachine, "ns1", "self")))
	x := obj(gvkConfigMap, "ns1", "x", ownedByRef(gvkConfigMap, "y", uidOf(gvkConfigMap, "ns1", "y")))
	y := obj(gvkConfigMap, "ns1", "y", ownedBy(x, false))

	tests := []struct {
		name       string
		objs       []*unstructured.Unstructured
		wantMoved  []string
		sameGroup  [][]*unstructured.Unstructured
		wantBefore []before
	}{
		{
			name:       "two objects owning each other are created in one group, after their other owners and before their dependents",
			objs:       []*unstructured.Unstructured{cluster, a, b, afterCycle},
			wantMoved:  names(cluster, a, b, afterCycle),
			sameGroup:  [][]*unstructured.Unstructured{{a, b}},
			wantBefore: []before{{cluster, a}, {cluster, b}, {a, afterCycle}, {b, afterCycle}},
		},
		{
			name:       "an object owning itself moves",
			objs:       []*unstructured.Unstructured{cluster, self},
			wantMoved:  names(cluster, self),
			wantBefore: []before{{cluster, self}},
		},
		{
			name: "a cycle no root owns does not move",
			objs: []*unstructured.Unstructured{x, y},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, nil, tt.objs...).Plan(Selection{})
			if diff := cmp.Diff(tt.wantMoved, moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			for _, set := range tt.sameGroup {
				for _, o := range set[1:] {
					if groupIndex(p, o) != groupIndex(p, set[0]) {
						t.Errorf("%s is in group %d, %s in group %d: want the same", nameOf(o), groupIndex(p, o), nameOf(set[0]), groupIndex(p, set[0]))
					}
				}
			}
			checkOrder(t, p, tt.wantBefore)
			if err := p.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestOwnersThatDoNotMove(t *testing.T) {
	cluster := obj(gvkCluster, "ns1", "c1")
	machine := obj(gvkMachine, "ns1", "m1", ownedBy(cluster, false))
	ownedByDeployment := obj(gvkInfraMachine, "ns1", "m1", ownedBy(machine, true), ownedByRef(gvkDeployment, "web", "uid-web"))
	grandchild := obj(gvkSecret, "ns1", "m1-data", ownedBy(ownedByDeployment, true))
	dangling := obj(gvkKubeadmConfig, "ns1", "m1", ownedBy(machine, true), ownedByRef(gvkMachine, "gone", "uid-gone"))
	unownedCM := obj(gvkConfigMap, "ns1", "loose")
	ownedByLoose := obj(gvkSecret, "ns1", "m1-extra", ownedBy(machine, false), ownedBy(unownedCM, false))
	globalWithDeploymentOwner := obj(gvkIdentity, "", "id", ownedByRef(gvkDeployment, "web", "uid-web"))
	outsideCluster := obj(gvkCluster, "ns2", "c2")
	// A MachineSet whose MachineDeployment was deleted and created again:
	// its reference names the old UID. Its Machine stays behind with it.
	deployment := obj(gvkMachineDeployment, "ns1", "md", ownedBy(cluster, false))
	staleSet := obj(gvkMachineSet, "ns1", "md-abc", ownedByRef(gvkMachineDeployment, "md", "uid-md-before"))
	staleSetMachine := obj(gvkMachine, "ns1", "md-abc-1", ownedBy(staleSet, true))
	// A Secret owned only by a Cluster that no longer exists, under an old
	// API version the garbage collector no longer serves.
	orphanSecret := obj(gvkSecret, "ns1", "leftover", ownedByRef(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1alpha3", Kind: "Cluster"}, "old", "uid-old"))

	tests := []struct {
		name         string
		namespaces   []string
		objs         []*unstructured.Unstructured
		wantMoved    []string
		wantBlocking map[string]string // object name -> words its reason contains
		wantWarn     string
	}{
		{
			name:         "an object owned by a kind that does not move is reported and blocks the move, and so is what it owns",
			objs:         []*unstructured.Unstructured{cluster, machine, ownedByDeployment, grandchild},
			wantMoved:    names(cluster, machine),
			wantBlocking: map[string]string{nameOf(ownedByDeployment): "owner Deployment.apps ns1/web is of a kind that does not move", nameOf(grandchild): "its owner TestMachine.infrastructure.cluster.x-k8s.io ns1/m1 cannot move"},
		},
		{
			name:         "an object owned by something nothing moves is reported and blocks the move",
			objs:         []*unstructured.Unstructured{cluster, machine, unownedCM, ownedByLoose},
			wantMoved:    names(cluster, machine),
			wantBlocking: map[string]string{nameOf(ownedByLoose): "its owner ConfigMap ns1/loose does not move"},
		},
		{
			name:      "an object whose owner no longer exists moves without that reference, with a warning",
			objs:      []*unstructured.Unstructured{cluster, machine, dangling},
			wantMoved: names(cluster, machine, dangling),
			wantWarn:  "KubeadmConfig.bootstrap.cluster.x-k8s.io ns1/m1 is copied without its ownerReference to Machine.cluster.x-k8s.io ns1/gone: the owner does not exist",
		},
		{
			name:      "an object whose only owner names another UID than the object of that name is reported and blocks the move, and so is what it owns",
			objs:      []*unstructured.Unstructured{cluster, deployment, staleSet, staleSetMachine},
			wantMoved: names(cluster, deployment),
			wantBlocking: map[string]string{
				nameOf(staleSet):        "its owner MachineDeployment.cluster.x-k8s.io ns1/md does not exist (MachineDeployment.cluster.x-k8s.io ns1/md exists with UID uid-machinedeployment-ns1-md",
				nameOf(staleSetMachine): "it belongs to MachineSet.cluster.x-k8s.io ns1/md-abc, which stays behind: its owner MachineDeployment",
			},
		},
		{
			name:         "an object whose only owner was deleted is reported and blocks the move",
			objs:         []*unstructured.Unstructured{cluster, orphanSecret},
			wantMoved:    names(cluster),
			wantBlocking: map[string]string{nameOf(orphanSecret): "its owner Cluster.cluster.x-k8s.io ns1/old does not exist"},
		},
		{
			name:      "a global object whose owner does not move is copied without that reference, with a warning",
			objs:      []*unstructured.Unstructured{globalWithDeploymentOwner},
			wantMoved: names(globalWithDeploymentOwner),
			wantWarn:  "TestClusterIdentity.infrastructure.cluster.x-k8s.io id is copied without its ownerReference to Deployment.apps web",
		},
		{
			name:       "objects outside the moved namespaces are neither moved nor reported",
			namespaces: []string{"ns1"},
			objs:       []*unstructured.Unstructured{cluster, outsideCluster},
			wantMoved:  names(cluster),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, tt.namespaces, tt.objs...).Plan(Selection{})
			if diff := cmp.Diff(tt.wantMoved, moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			got := map[string]string{}
			for _, e := range p.Excluded {
				if e.Blocking {
					got[name(e.ObjectRef)] = e.Message
				}
			}
			if len(got) != len(tt.wantBlocking) {
				t.Errorf("blocking exclusions %v, want %d", got, len(tt.wantBlocking))
			}
			for n, words := range tt.wantBlocking {
				if !strings.Contains(got[n], words) {
					t.Errorf("%s: reason %q does not say %q", n, got[n], words)
				}
			}
			err := p.Validate()
			if (err != nil) != (len(tt.wantBlocking) > 0) {
				t.Errorf("Validate: %v, want an error: %v", err, len(tt.wantBlocking) > 0)
			}
			for n := range tt.wantBlocking {
				if err != nil && !strings.Contains(err.Error(), strings.SplitN(n, " ", 2)[1]) {
					t.Errorf("Validate error %q does not name %s", err, n)
				}
			}
			if tt.wantWarn != "" && !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, tt.wantWarn) }) {
				t.Errorf("warnings %q do not mention %q", p.Warnings, tt.wantWarn)
			}
			for _, e := range p.Excluded {
				if e.Namespace == "ns2" {
					t.Errorf("%s is outside the moved namespaces but reported: %s", name(e.ObjectRef), e.Message)
				}
			}
		})
	}
}

func TestClusterSelectorMovesOnlySelectedHierarchies(t *testing.T) {
	prodSel := labels.SelectorFromSet(labels.Set{"env": "prod"})
	prod := fleetCluster("ns1", "prod", label("env", "prod"))
	dev := fleetCluster("ns1", "dev", label("env", "dev"))
	crs := obj(gvkCRS, "ns1", "addons")
	crsCM := obj(gvkConfigMap, "ns1", "addons", ownedBy(crs, false))
	prodBinding := obj(gvkCRSBinding, "ns1", "prod", ownedBy(crs, false), field("prod", "spec", "clusterName"))
	devBinding := obj(gvkCRSBinding, "ns1", "dev", ownedBy(crs, false), field("dev", "spec", "clusterName"))
	unusedClass := obj(gvkClusterClass, "ns1", "unused")
	identity := obj(gvkIdentity, "", "id")
	forced := obj(gvkConfigMap, "ns1", "cloud-config", label(MoveLabel, ""))

	tests := []struct {
		name         string
		objs         []*unstructured.Unstructured
		wantMoved    []string
		wantKept     []string
		notSelected  []string
		notSelectMsg string
	}{
		{
			name:         "only the selected Clusters and their hierarchies move",
			objs:         objects(prod, dev),
			wantMoved:    namesOf(prod),
			notSelected:  namesOf(dev),
			notSelectMsg: "Cluster.cluster.x-k8s.io ns1/dev, which is not selected",
		},
		{
			name:        "a ClusterResourceSet bound to selected and unselected Clusters is copied but not deleted, and only the selected binding moves",
			objs:        objects(prod, dev, []*unstructured.Unstructured{crs, crsCM, prodBinding, devBinding}),
			wantMoved:   namesOf(objects(prod, []*unstructured.Unstructured{crs, crsCM, prodBinding})),
			wantKept:    names(crs, crsCM),
			notSelected: namesOf(objects(dev, []*unstructured.Unstructured{devBinding})),
		},
		{
			name:        "a ClusterResourceSet bound only to selected Clusters moves and is deleted",
			objs:        objects(prod, dev, []*unstructured.Unstructured{crs, crsCM, prodBinding}),
			wantMoved:   namesOf(objects(prod, []*unstructured.Unstructured{crs, crsCM, prodBinding})),
			notSelected: namesOf(dev),
		},
		{
			name:         "a ClusterClass no selected Cluster uses does not move",
			objs:         objects(prod, []*unstructured.Unstructured{unusedClass}),
			wantMoved:    namesOf(prod),
			notSelected:  names(unusedClass),
			notSelectMsg: "no selected Cluster uses it",
		},
		{
			name:      "a cluster-scoped identity is copied whatever the selector",
			objs:      objects(prod, []*unstructured.Unstructured{identity}),
			wantMoved: namesOf(objects(prod, []*unstructured.Unstructured{identity})),
			wantKept:  names(identity),
		},
		{
			name:      "an object labelled move is copied but not deleted, since unselected Clusters may use it",
			objs:      objects(prod, []*unstructured.Unstructured{forced}),
			wantMoved: namesOf(objects(prod, []*unstructured.Unstructured{forced})),
			wantKept:  names(forced),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := build(t, nil, tt.objs...).Plan(Selection{ClusterSelector: prodSel})
			if diff := cmp.Diff(tt.wantMoved, moved(p)); diff != "" {
				t.Errorf("moved objects differ (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantKept, kept(p)); diff != "" {
				t.Errorf("objects kept in the source differ (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.notSelected, excluded(p, ExcludedNotSelected)); diff != "" {
				t.Errorf("objects reported as not selected differ (-want +got):\n%s", diff)
			}
			if tt.notSelectMsg != "" && !slices.ContainsFunc(p.Excluded, func(e Exclusion) bool { return strings.Contains(e.Message, tt.notSelectMsg) }) {
				t.Errorf("no exclusion says %q: %+v", tt.notSelectMsg, p.Excluded)
			}
			if err := p.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}

	t.Run("a selector that matches nothing moves only global objects", func(t *testing.T) {
		p := build(t, nil, objects(prod, dev, []*unstructured.Unstructured{identity})...).
			Plan(Selection{ClusterSelector: labels.SelectorFromSet(labels.Set{"env": "staging"})})
		if diff := cmp.Diff(names(identity), moved(p)); diff != "" {
			t.Errorf("moved objects differ (-want +got):\n%s", diff)
		}
	})
}

func TestGroupOrderIsDeterministic(t *testing.T) {
	want := [][]string{
		{"Cluster ns1/c1"},
		{"KubeadmConfigTemplate ns1/c1-md", "KubeadmControlPlane ns1/c1-cp", "MachineDeployment ns1/c1-md", "TestCluster ns1/c1", "TestMachineTemplate ns1/c1-cp", "TestMachineTemplate ns1/c1-md"},
		{"Machine ns1/c1-cp-0", "MachineSet ns1/c1-md-abc", "Secret ns1/c1-ca", "Secret ns1/c1-etcd", "Secret ns1/c1-kubeconfig", "Secret ns1/c1-proxy", "Secret ns1/c1-sa"},
		{"KubeadmConfig ns1/c1-cp-0", "Machine ns1/c1-md-abc-0", "TestMachine ns1/c1-cp-0"},
		{"KubeadmConfig ns1/c1-md-abc-0", "Secret ns1/c1-cp-0", "TestMachine ns1/c1-md-abc-0"},
		{"Secret ns1/c1-md-abc-0"},
	}
	objs := fleetCluster("ns1", "c1")
	first := build(t, nil, objs...).Plan(Selection{})
	if diff := cmp.Diff(want, groupsOf(first)); diff != "" {
		t.Fatalf("groups differ (-want +got):\n%s", diff)
	}

	// Objects of three Clusters read in many different orders give the same
	// plan, printed the same way.
	all := objects(fleetCluster("ns1", "a"), fleetCluster("ns1", "b"), fleetCluster("ns2", "a"), []*unstructured.Unstructured{
		obj(gvkConfigMap, "ns1", "loose"), obj(gvkIdentity, "", "id"),
	})
	reference := build(t, nil, all...).Plan(Selection{}).String()
	rng := rand.New(rand.NewSource(1))
	for i := range 20 {
		shuffled := slices.Clone(all)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if got := build(t, nil, shuffled...).Plan(Selection{}).String(); got != reference {
			t.Fatalf("order %d gives another plan:\n%s", i, cmp.Diff(reference, got))
		}
	}
}

func TestPlanChanges(t *testing.T) {
	fleet := fleetCluster("ns1", "c1", label("env", "prod"))
	cluster := fleet[0]
	kubeconfig := fleet[16]
	other := fleetCluster("ns1", "c2", label("env", "prod"))
	loose := obj(gvkConfigMap, "ns1", "loose")
	latecomer := obj(gvkMachine, "ns1", "late", ownedBy(cluster, false))
	prod := labels.SelectorFromSet(labels.Set{"env": "prod"})
	source := objects(fleet, other, []*unstructured.Unstructured{loose})
	recorded := build(t, nil, source...).Plan(Selection{ClusterSelector: prod})
	// As a move reads its plan back from its record: the groups alone.
	readBack := NewPlan(recorded.Groups)

	t.Run("a plan read back moves the same objects in the same groups", func(t *testing.T) {
		if diff := cmp.Diff(groupsOf(recorded), groupsOf(readBack)); diff != "" {
			t.Errorf("plan read back differs (-want +got):\n%s", diff)
		}
		if readBack.Len() != recorded.Len() {
			t.Errorf("plan read back holds %d objects, want %d", readBack.Len(), recorded.Len())
		}
	})

	without := func(gone ...*unstructured.Unstructured) []*unstructured.Unstructured {
		return slices.DeleteFunc(slices.Clone(source), func(u *unstructured.Unstructured) bool { return slices.Contains(gone, u) })
	}
	// The same object as in source (same UID), changed by edit.
	changed := func(u *unstructured.Unstructured, edit option) []*unstructured.Unstructured {
		now := without(u)
		c := u.DeepCopy()
		edit(c)
		return append(now, c)
	}
	for _, tt := range []struct {
		name               string
		now                []*unstructured.Unstructured
		appeared, vanished []string
	}{{
		name: "the same source gives no changes",
		now:  source,
	}, {
		name:     "an object created in a moved hierarchy appeared",
		now:      append(slices.Clone(source), latecomer),
		appeared: names(latecomer),
	}, {
		name:     "an object deleted from the source vanished",
		now:      without(fleet[len(fleet)-1]),
		vanished: names(fleet[len(fleet)-1]),
	}, {
		name:     "an object that existed and now belongs to a moved hierarchy appeared",
		now:      changed(loose, ownedBy(cluster, false)),
		appeared: names(loose),
	}, {
		name:     "an object that now has an owner of a kind that does not move vanished",
		now:      changed(kubeconfig, ownedByRef(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "keeper", "uid-keeper")),
		vanished: names(kubeconfig),
	}, {
		name:     "a Cluster the selector no longer matches vanished with its hierarchy",
		now:      changed(other[0], label("env", "staging")),
		vanished: namesOf(other),
	}, {
		name:     "objects created and deleted are both found",
		now:      append(without(fleet[len(fleet)-1]), latecomer),
		appeared: names(latecomer),
		vanished: names(fleet[len(fleet)-1]),
	}} {
		t.Run(tt.name, func(t *testing.T) {
			g := build(t, nil, tt.now...)
			sel := Selection{ClusterSelector: prod}
			appeared, vanished := g.ChangesSince(readBack, sel)
			planned, plannedVanished := readBack.Changes(g.Plan(sel))
			for _, c := range []struct {
				what      string
				got, want []string
			}{
				{"ChangesSince: appeared", refNames(appeared), tt.appeared},
				{"ChangesSince: vanished", refNames(vanished), tt.vanished},
				{"Changes: appeared", refNames(planned), tt.appeared},
				{"Changes: vanished", refNames(plannedVanished), tt.vanished},
			} {
				if diff := cmp.Diff(sorted(c.want), sorted(c.got)); diff != "" {
					t.Errorf("%s differ (-want +got):\n%s", c.what, diff)
				}
			}
		})
	}
}

func refNames(refs []ObjectRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, name(r))
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestPlanChecks(t *testing.T) {
	const op = "op-1"
	pausedByUs := obj(gvkCluster, "ns1", "ours", field(true, "spec", "paused"), annotation(movev1alpha1.PausedByAnnotation, op))
	pausedByOthers := obj(gvkCluster, "ns1", "theirs", field(true, "spec", "paused"))
	pausedByAnnotation := obj(gvkClusterClass, "ns1", "cc", annotation(PausedAnnotation, ""))
	otherOperation := obj(gvkCluster, "ns1", "other")
	blocking := obj(gvkInfraCluster, "ns1", "other", ownedBy(otherOperation, true), annotation(BlockMoveAnnotation, "true"))
	deleting := obj(gvkCluster, "ns1", "deleting", func(u *unstructured.Unstructured) {
		u.Object["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	})

	p := build(t, nil, pausedByUs, pausedByOthers, pausedByAnnotation, otherOperation, blocking, deleting).Plan(Selection{})
	refs := func(rs []ObjectRef) []string {
		var out []string
		for _, r := range rs {
			out = append(out, name(r))
		}
		return out
	}
	t.Run("Clusters and ClusterClasses paused by someone else are found, those paused by this operation are not", func(t *testing.T) {
		if diff := cmp.Diff(names(pausedByOthers, pausedByAnnotation), refs(p.PausedByOthers(op))); diff != "" {
			t.Errorf("paused by others differ (-want +got):\n%s", diff)
		}
	})
	t.Run("objects carrying block-move are found", func(t *testing.T) {
		if diff := cmp.Diff(names(blocking), refs(p.BlockingMove())); diff != "" {
			t.Errorf("blocking objects differ (-want +got):\n%s", diff)
		}
	})
	t.Run("an object being deleted is warned about", func(t *testing.T) {
		if !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "ns1/deleting is being deleted") }) {
			t.Errorf("warnings %q do not mention the object being deleted", p.Warnings)
		}
	})
}

func TestSummaryAndPrint(t *testing.T) {
	objs := objects(fleetCluster("ns1", "c1"), []*unstructured.Unstructured{obj(gvkIdentity, "", "id"), obj(gvkConfigMap, "ns1", "loose")})
	p := build(t, nil, objs...).Plan(Selection{})

	t.Run("the summary counts objects per kind and groups", func(t *testing.T) {
		s := p.Summary()
		if s.Objects != 22 || s.Groups != 6 {
			t.Errorf("summary has %d objects in %d groups, want 22 in 6", s.Objects, s.Groups)
		}
		want := []movev1alpha1.KindCount{
			{Kind: "Cluster.cluster.x-k8s.io", Count: 1},
			{Kind: "KubeadmConfig.bootstrap.cluster.x-k8s.io", Count: 2},
			{Kind: "KubeadmConfigTemplate.bootstrap.cluster.x-k8s.io", Count: 1},
			{Kind: "KubeadmControlPlane.controlplane.cluster.x-k8s.io", Count: 1},
			{Kind: "Machine.cluster.x-k8s.io", Count: 2},
			{Kind: "MachineDeployment.cluster.x-k8s.io", Count: 1},
			{Kind: "MachineSet.cluster.x-k8s.io", Count: 1},
			{Kind: "Secret", Count: 7},
			{Kind: "TestCluster.infrastructure.cluster.x-k8s.io", Count: 1},
			{Kind: "TestClusterIdentity.infrastructure.cluster.x-k8s.io", Count: 1},
			{Kind: "TestMachine.infrastructure.cluster.x-k8s.io", Count: 2},
			{Kind: "TestMachineTemplate.infrastructure.cluster.x-k8s.io", Count: 2},
		}
		if diff := cmp.Diff(want, s.Kinds); diff != "" {
			t.Errorf("kinds differ (-want +got):\n%s", diff)
		}
		wantExcluded := []movev1alpha1.ExclusionCount{{Reason: "NotInHierarchy", Count: 1, Objects: []string{
			"ConfigMap ns1/loose: no Cluster, ClusterClass, ClusterResourceSet or move-hierarchy object owns it, and it is not labelled to move",
		}}}
		if diff := cmp.Diff(wantExcluded, s.Excluded); diff != "" {
			t.Errorf("what the move leaves out differs (-want +got):\n%s", diff)
		}
	})

	t.Run("the summary counts every exclusion and names only the first of each reason", func(t *testing.T) {
		var many []*unstructured.Unstructured
		for i := range 25 {
			many = append(many, obj(gvkSecret, "ns1", fmt.Sprintf("stale-%02d", i), ownedByRef(gvkCluster, "deleted", "uid-deleted")))
		}
		s := build(t, nil, objects(fleetCluster("ns1", "c1"), many)...).Plan(Selection{}).Summary()
		if len(s.Excluded) != 1 || s.Excluded[0].Reason != "OwnerMissing" || s.Excluded[0].Count != 25 || len(s.Excluded[0].Objects) != 10 {
			t.Fatalf("excluded = %+v, want 25 OwnerMissing with the first 10 named", s.Excluded)
		}
		if !strings.Contains(s.Excluded[0].Objects[0], "Secret ns1/stale-00: its owner Cluster.cluster.x-k8s.io ns1/deleted does not exist") {
			t.Errorf("the first entry does not say why it stays: %q", s.Excluded[0].Objects[0])
		}
	})

	t.Run("the printed plan lists each group, what is not deleted and what does not move", func(t *testing.T) {
		out := p.String()
		for _, want := range []string{
			"Move plan: 22 objects in 6 groups",
			"Group 1 (2 objects):\n  Cluster.cluster.x-k8s.io ns1/c1\n  TestClusterIdentity.infrastructure.cluster.x-k8s.io id  [copied, not deleted]\n",
			"1 objects that nothing moving owns",
			"Warnings:\n  - TestClusterIdentity.infrastructure.cluster.x-k8s.io id is copied but not deleted from the source: it is cluster-scoped",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("printed plan does not contain %q:\n%s", want, out)
			}
		}
	})

	t.Run("a long status entry is clipped on a character boundary", func(t *testing.T) {
		long := strings.Repeat("é", 200) // 400 bytes
		got := clip(long)
		if len(got) > maxStatusEntry || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
			t.Errorf("clip gave %d bytes, valid UTF-8 %t, ending %q; want at most %d, valid, ending with ...", len(got), utf8.ValidString(got), got[len(got)-5:], maxStatusEntry)
		}
		if short := "short"; clip(short) != short {
			t.Errorf("clip changed a short entry to %q", clip(short))
		}
	})

	t.Run("warnings beyond what the status holds are summarised in the last one", func(t *testing.T) {
		var many []*unstructured.Unstructured
		for i := range 150 {
			many = append(many, obj(gvkIdentity, "", "id-"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26))))
		}
		s := build(t, nil, many...).Plan(Selection{}).Summary()
		if len(s.Warnings) != 100 || s.Warnings[99] != "and 51 more warnings" {
			t.Errorf("got %d warnings ending with %q, want 100 ending with \"and 51 more warnings\"", len(s.Warnings), s.Warnings[len(s.Warnings)-1])
		}
	})
}
