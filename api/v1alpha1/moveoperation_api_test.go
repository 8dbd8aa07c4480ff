//go:build cluster

package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// These tests run the generated CRD in a real kube-apiserver: what they check
// is what a user meets with kubectl, not what the Go types promise.

var (
	k8sClient client.Client
	testNS    = "api-test"
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, or set it to the output of `hack/kube-binaries.sh | tail -1`")
		os.Exit(1)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting kube-apiserver: %v\n", err)
		os.Exit(1)
	}
	code := run(m, cfg)
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping kube-apiserver: %v\n", err)
	}
	os.Exit(code)
}

func run(m *testing.M, cfg *rest.Config) int {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := movev1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	k8sClient = c
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		panic(err)
	}
	return m.Run()
}

// validSpec is the smallest spec the API accepts.
func validSpec() movev1alpha1.MoveOperationSpec {
	return movev1alpha1.MoveOperationSpec{
		Target: movev1alpha1.TargetSpec{
			KubeconfigSecretRef: movev1alpha1.SecretKeyReference{Name: "target-kubeconfig"},
		},
	}
}

func newMoveOperation(name string, spec movev1alpha1.MoveOperationSpec) *movev1alpha1.MoveOperation {
	return &movev1alpha1.MoveOperation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec:       spec,
	}
}

func TestAValidMoveOperationGetsItsDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mo := newMoveOperation("defaults", validSpec())
	g.Expect(k8sClient.Create(ctx, mo)).To(Succeed())

	got := &movev1alpha1.MoveOperation{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mo), got)).To(Succeed())

	g.Expect(got.Spec.Target.KubeconfigSecretRef.Key).To(Equal("value"), "the kubeconfig key defaults to the Cluster API convention")
	g.Expect(got.Spec.DryRun).To(BeFalse())
	g.Expect(got.Spec.Controllers.FallbackReplicas).To(Equal(ptr.To[int32](1)))
	g.Expect(got.Spec.Controllers.Selector).To(Equal(&metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: movev1alpha1.DefaultControllerLabel, Operator: metav1.LabelSelectorOpExists,
		}},
	}), "controllers default to every Deployment clusterctl labels as a provider")
	g.Expect(got.Spec.Controllers.Additional).To(BeEmpty(), "no managers are named unless the user names them")
	g.Expect(got.Spec.Timeouts.ScaleDown).To(Equal(&metav1.Duration{Duration: 5 * time.Minute}))
	g.Expect(got.Spec.Timeouts.ScaleUp).To(Equal(&metav1.Duration{Duration: 10 * time.Minute}))
	g.Expect(got.Spec.Timeouts.BlockMove).To(Equal(&metav1.Duration{Duration: 10 * time.Minute}))
	g.Expect(got.Spec.Timeouts.Copy).To(Equal(&metav1.Duration{Duration: 10 * time.Minute}))
	g.Expect(got.Spec.GitOps).To(Equal(movev1alpha1.GitOpsRefuse), "a move refuses GitOps-managed objects unless told otherwise")
}

func TestInvalidSpecsAreRejectedWithAMessageThatNamesTheProblem(t *testing.T) {
	tooManyNamespaces := make([]string, 257)
	for i := range tooManyNamespaces {
		tooManyNamespaces[i] = fmt.Sprintf("ns-%d", i)
	}
	cases := []struct {
		name   string
		mutate func(*movev1alpha1.MoveOperationSpec)
		// rawTimeouts are sent as raw JSON, for values the Go types cannot hold.
		rawTimeouts map[string]any
		// want are substrings the API server's error must hold.
		want []string
	}{
		{
			name: "a missing Secret name is required",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Target.KubeconfigSecretRef.Name, s.Target.KubeconfigSecretRef.Key = "", "value"
			},
			want: []string{"spec.target.kubeconfigSecretRef.name", "at least 1 chars long"},
		},
		{
			name:   "a Secret name that is not a DNS-1123 subdomain is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Target.KubeconfigSecretRef.Name = "Target_Kubeconfig" },
			want:   []string{"spec.target.kubeconfigSecretRef.name", "must be a Secret name"},
		},
		{
			name:   "a Secret name longer than 253 characters is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Target.KubeconfigSecretRef.Name = strings.Repeat("a", 254) },
			want:   []string{"spec.target.kubeconfigSecretRef.name", "may not be more than 253"},
		},
		{
			name:   "a Secret key with a slash is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Target.KubeconfigSecretRef.Key = "path/to/value" },
			want:   []string{"spec.target.kubeconfigSecretRef.key", "must be a Secret data key"},
		},
		{
			name:   "a namespace that is not a DNS-1123 label is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Namespaces = []string{"Capi_Clusters"} },
			want:   []string{"spec.namespaces[0]", "should match"},
		},
		{
			name:   "a namespace longer than 63 characters is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Namespaces = []string{strings.Repeat("n", 64)} },
			want:   []string{"spec.namespaces[0]", "may not be more than 63"},
		},
		{
			name:   "a namespace listed twice is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Namespaces = []string{"fleet", "fleet"} },
			want:   []string{"spec.namespaces[1]", "Duplicate value"},
		},
		{
			name:   "more than 256 namespaces are refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Namespaces = tooManyNamespaces },
			want:   []string{"spec.namespaces", "must have at most 256 items"},
		},
		{
			name:   "negative fallback replicas are refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Controllers.FallbackReplicas = ptr.To[int32](-1) },
			want:   []string{"spec.controllers.fallbackReplicas", "greater than or equal to 0"},
		},
		{
			name: "an additional controller in a cluster other than Source, Target or Both is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Controllers.Additional = []movev1alpha1.AdditionalController{{Cluster: "Management", Namespace: "turtles", Name: "turtles"}}
			},
			want: []string{"spec.controllers.additional[0].cluster", "Unsupported value", `"Both"`},
		},
		{
			name: "an additional controller without a name is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Controllers.Additional = []movev1alpha1.AdditionalController{{Namespace: "turtles"}}
			},
			want: []string{"spec.controllers.additional[0].name"},
		},
		{
			name: "an additional controller in a namespace that is not a DNS-1123 label is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Controllers.Additional = []movev1alpha1.AdditionalController{{Namespace: "Rancher_Turtles", Name: "turtles"}}
			},
			want: []string{"spec.controllers.additional[0].namespace", "should match"},
		},
		{
			name:        "a timeout that is not a Go duration is refused",
			mutate:      func(*movev1alpha1.MoveOperationSpec) {},
			rawTimeouts: map[string]any{"scaleDown": "5 minutes"},
			want:        []string{"spec.timeouts.scaleDown", "should match"},
		},
		{
			name:   "a zero timeout is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Timeouts.Copy = &metav1.Duration{} },
			want:   []string{"spec.timeouts.copy", "must be a positive duration"},
		},
		{
			name:   "an invalid scale-up timeout is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Timeouts.ScaleUp = &metav1.Duration{Duration: -time.Minute} },
			want:   []string{"spec.timeouts.scaleUp"},
		},
		{
			name:   "an unknown GitOps policy is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.GitOps = "Pause" },
			want:   []string{"spec.gitOps", "Refuse", "Suspend", "Ignore"},
		},
		{
			name: "the deprecated spec.status set apart from spec.objectStatusPolicy is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.ObjectStatusPolicy, s.DeprecatedStatus = movev1alpha1.ObjectStatusRebuild, movev1alpha1.ObjectStatusCarry
			},
			want: []string{"spec.status is the former name of spec.objectStatusPolicy", "set only spec.objectStatusPolicy"},
		},
		{
			name:   "an unknown object status policy is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.ObjectStatusPolicy = "Keep" },
			want:   []string{"spec.objectStatusPolicy", "Rebuild", "Carry"},
		},
		{
			name: "a target that is both a cluster and an archive is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Target.Archive = &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}, Unencrypted: true}
			},
			want: []string{"spec.target", "set exactly one"},
		},
		{
			name:   "a target that is neither a cluster nor an archive is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Target = movev1alpha1.TargetSpec{} },
			want:   []string{"spec.target", "set exactly one"},
		},
		{
			name: "an archive without a store is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Target = movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Unencrypted: true}}
			},
			want: []string{"spec.target.archive", "names one store"},
		},
		{
			name: "an archive neither encrypted nor unencrypted by name is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Target = movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}}}
			},
			want: []string{"spec.target.archive", "encrypted to the public keys", "unencrypted: true"},
		},
		{
			name: "an archive both encrypted and unencrypted is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Target = movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{},
					RecipientsSecretRef: &movev1alpha1.SecretKeyReference{Name: "keys"}, Unencrypted: true}}
			},
			want: []string{"spec.target.archive", "encrypted to the public keys"},
		},
		{
			name: "a registry repository with a tag is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) {
				s.Target = movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{OCI: &movev1alpha1.OCIStore{Repository: "registry.example.com/backups:latest"}, Unencrypted: true}}
			},
			want: []string{"spec.target.archive.oci.repository", "without a tag or digest"},
		},
		{
			name:   "a zero block-move timeout is refused",
			mutate: func(s *movev1alpha1.MoveOperationSpec) { s.Timeouts.BlockMove = &metav1.Duration{} },
			want:   []string{"spec.timeouts.blockMove", "must be a positive duration"},
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := validSpec()
			tc.mutate(&spec)
			mo := newMoveOperation(fmt.Sprintf("invalid-%d", i), spec)
			err := createRaw(mo, tc.rawTimeouts)
			g.Expect(err).To(HaveOccurred(), "the API server accepted an invalid spec")
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got: %v", err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

// A manifest written before spec.status was renamed spec.objectStatusPolicy
// still applies, and still chooses: GitOps repositories keep old manifests.
func TestAManifestWithTheFormerStatusFieldStillApplies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mo := newMoveOperation("former-status-field", validSpec())
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mo)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(movev1alpha1.GroupVersion.WithKind("MoveOperation"))
	g.Expect(unstructured.SetNestedField(u.Object, "Carry", "spec", "status")).To(Succeed())
	g.Expect(k8sClient.Create(ctx, u)).To(Succeed(), "a manifest with spec.status must still apply")

	got := &movev1alpha1.MoveOperation{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mo), got)).To(Succeed())
	g.Expect(got.Spec.ObjectStatusPolicy).To(BeEmpty(), "objectStatusPolicy has no CRD default, which would hide spec.status")
	g.Expect(got.Spec.ObjectStatusPolicyOrDefault()).To(Equal(movev1alpha1.ObjectStatusCarry))
	g.Expect(got.Spec.CarriesStatus()).To(BeTrue())
}

func TestAMissingTargetIsRejected(t *testing.T) {
	g := NewWithT(t)
	mo := newMoveOperation("no-target", movev1alpha1.MoveOperationSpec{})
	err := createRaw(mo, nil, "target")
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("set exactly one of spec.target and spec.source"))
}

func TestTheSpecCannotBeChangedOnceCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mo := newMoveOperation("immutable", validSpec())
	g.Expect(k8sClient.Create(ctx, mo)).To(Succeed())

	changed := mo.DeepCopy()
	changed.Spec.DryRun = true
	err := k8sClient.Update(ctx, changed)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))

	changedTimeout := mo.DeepCopy()
	changedTimeout.Spec.Timeouts.Copy = &metav1.Duration{Duration: time.Hour}
	err = k8sClient.Update(ctx, changedTimeout)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))

	gitOps := mo.DeepCopy()
	gitOps.Spec.GitOps = movev1alpha1.GitOpsIgnore
	err = k8sClient.Update(ctx, gitOps)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "changing spec.gitOps must be refused, got: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))

	added := mo.DeepCopy()
	added.Spec.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	err = k8sClient.Update(ctx, added)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "adding a cluster selector must be refused, got: %v", err)

	// A Go client writes durations back in canonical form ("5m0s" for "5m"):
	// the same spec, which must not count as a change.
	raw := newMoveOperation("immutable-raw", validSpec())
	g.Expect(createRaw(raw, map[string]any{"scaleDown": "5m", "copy": "90s"})).To(Succeed())
	roundTripped := &movev1alpha1.MoveOperation{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(raw), roundTripped)).To(Succeed())
	roundTripped.Labels = map[string]string{"round": "trip"}
	g.Expect(k8sClient.Update(ctx, roundTripped)).To(Succeed())

	// Metadata stays editable: GitOps tools add labels and annotations.
	labelled := mo.DeepCopy()
	labelled.Labels = map[string]string{"team": "platform"}
	g.Expect(k8sClient.Update(ctx, labelled)).To(Succeed())
}

func TestStatusIsWrittenOnlyThroughTheStatusSubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mo := newMoveOperation("status", validSpec())
	g.Expect(k8sClient.Create(ctx, mo)).To(Succeed())

	viaMain := mo.DeepCopy()
	viaMain.Status.Phase = movev1alpha1.PhaseCopying
	g.Expect(k8sClient.Update(ctx, viaMain)).To(Succeed())
	got := &movev1alpha1.MoveOperation{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mo), got)).To(Succeed())
	g.Expect(got.Status.Phase).To(BeEmpty(), "a write of the main resource must not change status")

	got.Status.Phase = movev1alpha1.PhaseCopying
	g.Expect(k8sClient.Status().Update(ctx, got)).To(Succeed())
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mo), got)).To(Succeed())
	g.Expect(got.Status.Phase).To(Equal(movev1alpha1.PhaseCopying))
}

func TestEveryPhaseIsAcceptedAndNoOther(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mo := newMoveOperation("phases", validSpec())
	g.Expect(k8sClient.Create(ctx, mo)).To(Succeed())

	want := []string{"Pending", "Validating", "Recording", "ScalingDown", "Copying", "Deleting",
		"RestoringTarget", "RestoringSource", "Done", "RollingBack", "Failed"}
	for _, p := range want {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mo), mo)).To(Succeed())
		mo.Status.Phase = movev1alpha1.MovePhase(p)
		g.Expect(k8sClient.Status().Update(ctx, mo)).To(Succeed(), "phase %s must be accepted", p)
	}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mo), mo)).To(Succeed())
	mo.Status.Phase = "Paused"
	err := k8sClient.Status().Update(ctx, mo)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "an unknown phase must be refused, got: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("status.phase"))
}

func TestTheCRDShowsPhaseTargetProgressAndAge(t *testing.T) {
	g := NewWithT(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: "moveoperations.move.cluster.x-k8s.io"}, crd)).To(Succeed())

	g.Expect(crd.Spec.Scope).To(Equal(apiextensionsv1.NamespaceScoped))
	g.Expect(crd.Spec.Names.ShortNames).To(ContainElement("mo"))
	g.Expect(crd.Spec.Versions).To(HaveLen(1))
	v := crd.Spec.Versions[0]
	g.Expect(v.Subresources).NotTo(BeNil())
	g.Expect(v.Subresources.Status).NotTo(BeNil(), "status must be a subresource")

	columns := map[string]string{}
	for _, c := range v.AdditionalPrinterColumns {
		columns[c.Name] = c.JSONPath
	}
	g.Expect(columns).To(Equal(map[string]string{
		"Phase":    ".status.phase",
		"Target":   ".spec.target.kubeconfigSecretRef.name",
		"Progress": ".status.progress.summary",
		"Archive":  ".status.archive.location",
		"Age":      ".metadata.creationTimestamp",
	}))

	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	g.Expect(spec.XValidations).To(ContainElement(HaveField("Message", ContainSubstring("spec is immutable"))), "the spec must carry the immutability rule")
}

// createRaw creates mo as unstructured JSON, with timeouts overridden by the
// given raw values and the named spec fields removed: the way to send what
// the Go types cannot hold (a malformed duration, a missing required struct).
func createRaw(mo *movev1alpha1.MoveOperation, timeouts map[string]any, dropSpecFields ...string) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(mo)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(movev1alpha1.GroupVersion.WithKind("MoveOperation"))
	for k, v := range timeouts {
		if err := unstructured.SetNestedField(u.Object, v, "spec", "timeouts", k); err != nil {
			return err
		}
	}
	for _, f := range dropSpecFields {
		unstructured.RemoveNestedField(u.Object, "spec", f)
	}
	return k8sClient.Create(context.Background(), u)
}

func TestAnAdditionalControllerIsInBothClustersUnlessSaidOtherwise(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	spec := validSpec()
	spec.Controllers.Additional = []movev1alpha1.AdditionalController{
		{Namespace: "rancher-turtles-system", Name: "rancher-turtles-controller-manager"},
		{Cluster: movev1alpha1.ControllerInTarget, Namespace: "platform", Name: "platform-manager"},
	}
	mo := newMoveOperation("additional-defaults", spec)
	g.Expect(k8sClient.Create(ctx, mo)).To(Succeed())
	got := &movev1alpha1.MoveOperation{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mo), got)).To(Succeed())
	g.Expect(got.Spec.Controllers.Additional).To(Equal([]movev1alpha1.AdditionalController{
		{Cluster: movev1alpha1.ControllerInBoth, Namespace: "rancher-turtles-system", Name: "rancher-turtles-controller-manager"},
		{Cluster: movev1alpha1.ControllerInTarget, Namespace: "platform", Name: "platform-manager"},
	}))
	g.Expect(got.Spec.Controllers.FallbackReplicas).To(Equal(ptr.To[int32](1)), "naming managers keeps the other defaults of spec.controllers")
}
