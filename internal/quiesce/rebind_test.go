package quiesce

import (
	"context"
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const (
	oldUser = "system:serviceaccount:move-operator-target:mover-a"
	newUser = "system:serviceaccount:move-operator-target:mover-b"
)

func bypassFor(username string) admissionregistrationv1.MatchCondition {
	return admissionregistrationv1.MatchCondition{Name: BypassConditionName, Expression: BypassExpression(username)}
}

// someoneElses is a match condition the provider ships: never touched.
var someoneElses = admissionregistrationv1.MatchCondition{Name: "exclude-leases", Expression: `request.resource.resource != "leases"`}

func validating(name string, conds ...[]admissionregistrationv1.MatchCondition) *admissionregistrationv1.ValidatingWebhookConfiguration {
	o := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, c := range conds {
		o.Webhooks = append(o.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: name + "-" + string(rune('a'+i)), MatchConditions: c})
	}
	return o
}

// mutating is the core provider's mutating configuration, with a webhook
// per list of conditions.
func mutating(conds ...[]admissionregistrationv1.MatchCondition) *admissionregistrationv1.MutatingWebhookConfiguration {
	const name = "core"
	o := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i, c := range conds {
		o.Webhooks = append(o.Webhooks, admissionregistrationv1.MutatingWebhook{Name: name + "-" + string(rune('a'+i)), MatchConditions: c})
	}
	return o
}

func conds(c ...admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
	return c
}

func fakeCluster(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func TestBypassedUsernamesNamesTheIdentitiesTheBypassLetsThrough(t *testing.T) {
	cases := []struct {
		name string
		objs []client.Object
		want []string
	}{
		{name: "no bypass names nobody", objs: []client.Object{validating("core", conds(someoneElses))}, want: []string{}},
		{name: "one identity across configurations is named once", objs: []client.Object{
			validating("core", conds(someoneElses, bypassFor(oldUser)), nil),
			mutating(conds(bypassFor(oldUser))),
		}, want: []string{oldUser}},
		{name: "two identities half-way through a switch are both named", objs: []client.Object{
			validating("core", conds(bypassFor(newUser))),
			mutating(conds(bypassFor(oldUser))),
		}, want: []string{oldUser, newUser}},
		{name: "an expression edited by hand names an unknown identity", objs: []client.Object{
			validating("core", conds(admissionregistrationv1.MatchCondition{Name: BypassConditionName, Expression: "true"})),
		}, want: []string{""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BypassedUsernames(context.Background(), fakeCluster(t, tc.objs...))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("BypassedUsernames() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRebindBypassMovesTheBypassToTheNewIdentityAndTouchesNothingElse(t *testing.T) {
	cases := []struct {
		name      string
		objs      []client.Object
		wantFrom  []string
		wantWrote []string
	}{
		{
			name: "a bypass of the old identity is moved in every configuration that holds it",
			objs: []client.Object{
				validating("core", conds(someoneElses, bypassFor(oldUser)), conds(someoneElses)),
				mutating(conds(bypassFor(oldUser))),
				validating("unrelated", conds(someoneElses)),
			},
			wantFrom:  []string{oldUser},
			wantWrote: []string{"ValidatingWebhookConfiguration core", "MutatingWebhookConfiguration core"},
		},
		{
			name: "after a crash half-way only what still names the old identity is written",
			objs: []client.Object{
				validating("core", conds(bypassFor(newUser))),
				mutating(conds(bypassFor(oldUser))),
			},
			wantFrom:  []string{oldUser},
			wantWrote: []string{"MutatingWebhookConfiguration core"},
		},
		{
			name: "a bypass that names the identity already is not written",
			objs: []client.Object{validating("core", conds(bypassFor(newUser)))},
		},
		{
			name: "no bypass gets none",
			objs: []client.Object{validating("core", conds(someoneElses)), mutating(nil)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fakeCluster(t, tc.objs...)
			before, err := listConfigurations(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := RebindBypass(ctx, c, newUser)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.From, orEmpty(tc.wantFrom)) || !reflect.DeepEqual(got.Configurations, tc.wantWrote) {
				t.Fatalf("RebindBypass() = from %q, wrote %q; want from %q, wrote %q", got.From, got.Configurations, tc.wantFrom, tc.wantWrote)
			}
			after, err := listConfigurations(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			// Each webhook holds what it held before, the bypass now for
			// the new identity only, in the same place.
			for i, cfg := range after {
				for j, e := range cfg.entries {
					want := append([]admissionregistrationv1.MatchCondition(nil), *before[i].entries[j].matchConditions...)
					for k := range want {
						if want[k].Name == BypassConditionName {
							want[k] = bypassFor(newUser)
						}
					}
					if !reflect.DeepEqual(*e.matchConditions, want) {
						t.Errorf("%s %s webhook %s: match conditions %v, want %v", cfg.kind, cfg.object.GetName(), e.name, *e.matchConditions, want)
					}
				}
			}
			users, err := BypassedUsernames(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range users {
				if u != newUser {
					t.Errorf("a bypass for %q is left", u)
				}
			}
			again, err := RebindBypass(ctx, c, newUser)
			if err != nil || len(again.Configurations) > 0 {
				t.Errorf("RebindBypass() again = %v, %v; want nothing written", again, err)
			}
		})
	}
}

func TestRemoveBypassRemovesTheBypassOfEveryIdentity(t *testing.T) {
	ctx := context.Background()
	c := fakeCluster(t,
		validating("core", conds(someoneElses, bypassFor(newUser))),
		mutating(conds(bypassFor(oldUser)), conds(bypassFor(newUser), someoneElses)),
	)
	if err := RemoveBypass(ctx, c); err != nil {
		t.Fatal(err)
	}
	users, err := BypassedUsernames(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) > 0 {
		t.Fatalf("RemoveBypass() left a bypass for %q", users)
	}
	left, err := BypassInstalled(ctx, c)
	if err != nil || len(left) > 0 {
		t.Fatalf("BypassInstalled() = %q, %v after RemoveBypass()", left, err)
	}
}

func TestUsernameOfReadsBackWhatBypassExpressionWrote(t *testing.T) {
	for _, u := range []string{oldUser, `odd "quoted" \ user`, "ünïcode"} {
		if got, ok := usernameOf(BypassExpression(u)); !ok || got != u {
			t.Errorf("usernameOf(BypassExpression(%q)) = %q, %v", u, got, ok)
		}
	}
	for _, expr := range []string{"true", `request.userInfo.username != ""`, `request.userInfo.username == "x"`} {
		if got, ok := usernameOf(expr); ok {
			t.Errorf("usernameOf(%q) = %q, want no username", expr, got)
		}
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
