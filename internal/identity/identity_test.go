package identity_test

import (
	"testing"

	"github.com/move-operator/move-operator/internal/identity"
)

func TestOnlyAServiceAccountIsNotShared(t *testing.T) {
	for _, tc := range []struct {
		username string
		shared   bool
	}{
		{"system:serviceaccount:move-operator-system:move-operator-controller-manager", false},
		{"kubernetes-admin", true},
		{"system:admin", true},
		{"oidc:alice@example.com", true},
	} {
		t.Run(tc.username, func(t *testing.T) {
			if got := (identity.Identity{Username: tc.username}).Shared(); got != tc.shared {
				t.Errorf("Shared() = %v, want %v", got, tc.shared)
			}
		})
	}
}
