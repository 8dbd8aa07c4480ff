package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ArchiveTarget says where a backup writes its archive, and how it is
// encrypted. An archive holds every credential of the fleet (CA and etcd
// keys, kubeconfigs, cloud credentials): it is encrypted unless the spec
// asks otherwise by name.
// +kubebuilder:validation:XValidation:rule="has(self.directory) != has(self.oci)",message="spec.target.archive names one store: directory (a volume mounted in the operator's Pod) or oci (a registry repository)"
// +kubebuilder:validation:XValidation:rule="has(self.recipientsSecretRef) != (has(self.unencrypted) && self.unencrypted)",message="an archive is encrypted to the public keys of spec.target.archive.recipientsSecretRef; to write one in the clear (it holds every credential of the fleet), leave recipientsSecretRef out and set unencrypted: true"
type ArchiveTarget struct {
	// directory writes the archive as a file in the directory the operator
	// is given for archives (its --archive-directory flag: a volume
	// mounted in its Pod), named after the MoveOperation.
	// +optional
	Directory *DirectoryStore `json:"directory,omitempty"`

	// oci pushes the archive to a registry, as an artifact tagged with the
	// MoveOperation's name; status.archive pins it by digest.
	// +optional
	OCI *OCIStore `json:"oci,omitempty"`

	// recipientsSecretRef points at a Secret, in the MoveOperation's
	// namespace, whose key holds the public keys the archive is encrypted
	// to (age X25519 recipients, age1..., one per line; # starts a
	// comment). Any one of their private keys reads the archive. Keep the
	// private keys outside the cluster that is backed up.
	// +optional
	RecipientsSecretRef *SecretKeyReference `json:"recipientsSecretRef,omitempty"`

	// unencrypted writes the archive in the clear (clusterctl move
	// --from-directory can read it once unpacked). Every credential of the
	// fleet is then readable by whoever can read the store: the backup
	// raises a Warning event.
	// +optional
	Unencrypted bool `json:"unencrypted,omitempty"`
}

// DirectoryStore keeps archives in the operator's archive directory.
type DirectoryStore struct{}

// OCIStore keeps archives in a repository of an OCI registry.
type OCIStore struct {
	// repository is registry/repository, without tag or digest
	// (registry.example.com/backups/mgmt).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.matches(':[^/]*$')",message="must be registry/repository without a tag or digest: the backup tags the archive with the MoveOperation's name and pins it by digest in status.archive"
	Repository string `json:"repository"`

	// credentialsSecretRef names a Secret, in the MoveOperation's
	// namespace, of type kubernetes.io/dockerconfigjson, whose credentials
	// for the registry push the archive. Unset pushes anonymously.
	// +optional
	CredentialsSecretRef *LocalSecretReference `json:"credentialsSecretRef,omitempty"`

	// insecure talks plain HTTP to the registry. Only for a registry on a
	// network nobody else reaches: the archive stays encrypted, but its
	// size and the credentials are sent in the clear.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
}

// LocalSecretReference names a Secret in the MoveOperation's namespace.
type LocalSecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ArchiveStatus says where a backup's archive is, once stored whole.
type ArchiveStatus struct {
	// location is where the archive is: a file's path in the operator's
	// archive directory, or a registry reference pinned by digest
	// (registry/repository@sha256:...). A restore names it.
	// +required
	Location string `json:"location"`

	// digest is the SHA-256 of the archive's bytes, or in a registry of
	// the artifact's manifest (which pins the archive's).
	// +required
	Digest string `json:"digest"`

	// size is the archive's size in bytes.
	// +optional
	Size int64 `json:"size,omitempty"`

	// objects is how many objects the archive holds.
	// +optional
	Objects int32 `json:"objects,omitempty"`

	// encrypted says whether the archive is encrypted.
	// +optional
	Encrypted bool `json:"encrypted,omitempty"`

	// controllersStoppedFor is how long the source's providers were
	// stopped for the backup: from when the first was scaled to zero to
	// when the last was running again.
	// +optional
	ControllersStoppedFor *metav1.Duration `json:"controllersStoppedFor,omitempty"`

	// storedTime is when the archive was stored whole.
	// +optional
	StoredTime *metav1.Time `json:"storedTime,omitempty"`
}

// SourceSpec says where a restore takes the management state from.
type SourceSpec struct {
	// archive is the archive to restore.
	// +required
	Archive ArchiveSource `json:"archive"`
}

// ArchiveSource names an archive to restore, and the key to read it.
// +kubebuilder:validation:XValidation:rule="has(self.directory) != has(self.oci)",message="spec.source.archive names one store: directory (the operator's archive directory) or oci (a registry repository)"
type ArchiveSource struct {
	// directory reads the archive from the operator's archive directory
	// (its --archive-directory flag).
	// +optional
	Directory *DirectoryStore `json:"directory,omitempty"`

	// oci pulls the archive from a registry.
	// +optional
	OCI *OCIStore `json:"oci,omitempty"`

	// location is the archive in the store, as the backup's
	// status.archive.location says it: a file's name (or path) in the
	// archive directory, or a registry reference pinned by digest
	// (registry/repository@sha256:..., or sha256:... of the repository).
	// A digest is what a restore should name: a tag may have moved. In the
	// archive directory it may also name a directory that clusterctl move
	// --to-directory wrote (or manager archive decrypt unpacked).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Location string `json:"location"`

	// identitySecretRef points at a Secret, in the MoveOperation's
	// namespace, whose key holds the private keys that read the archive
	// (age X25519 identities, AGE-SECRET-KEY-1..., one per line). Unset
	// reads only an unencrypted archive.
	// +optional
	IdentitySecretRef *SecretKeyReference `json:"identitySecretRef,omitempty"`
}

// IsRestore reports whether the MoveOperation restores an archive.
func (s MoveOperationSpec) IsRestore() bool { return s.Source != nil }
