//go:build cluster

package movetest

import (
	"context"
	"path/filepath"
	"testing"

	"filippo.io/age"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/test/installed"
	"github.com/move-operator/move-operator/test/testenv"
)

// BackupKeys makes an age key pair, puts its public key in Secret
// "backup-keys" and its private key in Secret "restore-key" of ns, as a
// user gives a backup the keys to encrypt to and a restore the key that
// reads it; it returns the private key and the references of both.
func BackupKeys(t *testing.T, ns string) (id *age.X25519Identity, recipients, identity *movev1alpha1.SecretKeyReference) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	NewSecret(t, ns, "backup-keys", map[string][]byte{"recipients": []byte("# the fleet's backup key\n" + id.Recipient().String() + "\n")})
	NewSecret(t, ns, "restore-key", map[string][]byte{"identity": []byte(id.String() + "\n")})
	return id, &movev1alpha1.SecretKeyReference{Name: "backup-keys", Key: "recipients"}, &movev1alpha1.SecretKeyReference{Name: "restore-key", Key: "identity"}
}

// BackupSpec backs up namespaces to the operator's archive directory,
// encrypted to recipients.
func BackupSpec(recipients *movev1alpha1.SecretKeyReference, namespaces []string) movev1alpha1.MoveOperationSpec {
	return movev1alpha1.MoveOperationSpec{
		Target:     movev1alpha1.TargetSpec{Archive: &movev1alpha1.ArchiveTarget{Directory: &movev1alpha1.DirectoryStore{}, RecipientsSecretRef: recipients}},
		Namespaces: namespaces,
	}
}

// RestoreSpec restores the archive at location in the operator's archive
// directory, read with the key of identity.
func RestoreSpec(location string, identity *movev1alpha1.SecretKeyReference) movev1alpha1.MoveOperationSpec {
	return movev1alpha1.MoveOperationSpec{Source: &movev1alpha1.SourceSpec{Archive: movev1alpha1.ArchiveSource{
		Directory: &movev1alpha1.DirectoryStore{}, Location: filepath.Base(location), IdentitySecretRef: identity,
	}}}
}

// AllowRestores gives the operator, in the source (the cluster it runs
// in), the rights of a move's target, as docs/disaster-recovery.md says:
// the ClusterRole of dist/target-access.yaml bound to its ServiceAccount,
// until the test ends.
func AllowRestores(t *testing.T) {
	t.Helper()
	root, err := testenv.RepositoryRoot("go test")
	if err != nil {
		t.Fatal(err)
	}
	undo, err := installed.AllowRestores(context.Background(), Env.Source.Config, root, OperatorIdentity.Namespace, OperatorIdentity.ServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undo)
}
