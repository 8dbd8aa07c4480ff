package backupstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The media types of a backup pushed to a registry: an OCI image manifest
// whose config says it is no image (so that no runtime pulls it as one) and
// whose one layer is the archive, as written.
const (
	ArchiveConfigMediaType types.MediaType = "application/vnd.move-operator.archive.config.v1+json"
	ArchiveLayerMediaType  types.MediaType = "application/vnd.move-operator.archive.v1.tar"
)

// OCI keeps archives as artifacts of one repository of a registry, one tag
// per archive.
type OCI struct {
	// Repository is registry/repository, without tag or digest.
	Repository string
	// Auth is the registry's credentials; nil is anonymous.
	Auth authn.Authenticator
	// Insecure talks plain HTTP to the registry (go-containerregistry does
	// so on its own for localhost and private addresses).
	Insecure bool
	// Transport, when set, is the HTTP transport (a CA bundle of its own).
	Transport http.RoundTripper
	// SpoolDir is where archives are written before they are pushed (the
	// system's temporary directory when empty).
	SpoolDir string
}

// Put pushes the archive as Repository:name, its layer first and its
// manifest last: until the manifest is there, the tag names nothing, so a
// push that dies half-way leaves no archive. Location is pinned by the
// manifest's digest.
func (o OCI) Put(ctx context.Context, tag string, write func(io.Writer) error) (Stored, error) {
	ref, err := name.NewTag(o.Repository+":"+tag, o.nameOptions()...)
	if err != nil {
		return Stored{}, fmt.Errorf("%s:%s is not a registry reference: %w", o.Repository, tag, err)
	}
	f, digest, size, err := spool(o.SpoolDir, write)
	if err != nil {
		return Stored{}, err
	}
	defer os.Remove(f.Name()) //nolint:errcheck // a temporary file
	defer f.Close()           //nolint:errcheck // read only
	h, err := v1.NewHash(digest)
	if err != nil {
		return Stored{}, err
	}
	img, err := mutate.AppendLayers(empty.Image, &fileLayer{path: f.Name(), digest: h, size: size})
	if err != nil {
		return Stored{}, fmt.Errorf("making the artifact: %w", err)
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), ArchiveConfigMediaType)
	if err := remote.Write(ref, img, o.remoteOptions(ctx)...); err != nil {
		return Stored{}, registryError("pushing the archive to "+ref.String(), err)
	}
	manifest, err := img.Digest()
	if err != nil {
		return Stored{}, fmt.Errorf("reading the artifact's digest: %w", err)
	}
	return Stored{Location: ref.Context().Digest(manifest.String()).String(), Digest: manifest.String(), Size: size}, nil
}

// Open pulls the archive that ref names: a tag of Repository, a digest
// (sha256:...), or a whole reference. What it reads is checked against the
// layer's digest as it is read: a changed byte ends the read in an error.
func (o OCI) Open(ctx context.Context, ref string) (io.ReadCloser, error) {
	full := ref
	switch {
	case strings.HasPrefix(ref, "sha256:"):
		full = o.Repository + "@" + ref
	case !strings.ContainsAny(ref, "/:@"):
		full = o.Repository + ":" + ref
	}
	r, err := name.ParseReference(full, o.nameOptions()...)
	if err != nil {
		return nil, fmt.Errorf("%q is not a registry reference: %w", ref, err)
	}
	img, err := remote.Image(r, o.remoteOptions(ctx)...)
	if err != nil {
		return nil, registryError("reading the archive "+r.String(), err)
	}
	return archiveLayer(img, r)
}

func archiveLayer(img v1.Image, r name.Reference) (io.ReadCloser, error) {
	manifest, err := img.Manifest()
	if err != nil {
		return nil, registryError("reading the manifest of "+r.String(), err)
	}
	if manifest.Config.MediaType != ArchiveConfigMediaType || len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != ArchiveLayerMediaType {
		return nil, fmt.Errorf("%s is not a backup of this operator (its config is %q, with %d layers): name the tag or digest a backup recorded in its status", r, manifest.Config.MediaType, len(manifest.Layers))
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, registryError("reading "+r.String(), err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		return nil, registryError("reading the archive of "+r.String(), err)
	}
	return rc, nil
}

// CheckPush asks the registry whether the credentials may push to
// Repository, by starting an upload and cancelling it: a backup checks it
// before it stops anything, rather than find a refusal once every
// controller is stopped.
func (o OCI) CheckPush(ctx context.Context) error {
	ref, err := name.NewTag(o.Repository+":push-check", o.nameOptions()...)
	if err != nil {
		return fmt.Errorf("%s is not a registry repository: %w", o.Repository, err)
	}
	auth := o.Auth
	if auth == nil {
		auth = authn.Anonymous
	}
	t := o.Transport
	if t == nil {
		// Bounded: a registry that does not answer must not hold a
		// reconcile for ever.
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: 20 * time.Second, TLSHandshakeTimeout: 10 * time.Second}
	}
	done := make(chan error, 1)
	go func() { done <- remote.CheckPushPermission(ref, keychain{auth}, t) }()
	select {
	case err := <-done:
		if err != nil {
			return registryError("checking that "+o.Repository+" takes a push", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("checking that %s takes a push: %w", o.Repository, ctx.Err())
	}
}

// keychain gives the same credentials for every registry: those of the
// store's one repository.
type keychain struct{ auth authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }

func (o OCI) nameOptions() []name.Option {
	if o.Insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

func (o OCI) remoteOptions(ctx context.Context) []remote.Option {
	opts := []remote.Option{remote.WithContext(ctx)}
	if o.Auth != nil {
		opts = append(opts, remote.WithAuth(o.Auth))
	}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	return opts
}

// registryError says what the registry answered, and what to do about it.
func registryError(doing string, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s: the registry refused the credentials (HTTP %d): check the registry Secret's user and that it may push and pull this repository: %w", doing, terr.StatusCode, err)
		case http.StatusNotFound:
			return fmt.Errorf("%s: the registry has no such archive (HTTP 404): name a tag or digest a backup recorded in its status: %w", doing, err)
		}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// AuthFromDockerConfig returns the credentials a Secret of type
// kubernetes.io/dockerconfigjson (its .dockerconfigjson) holds for the
// registry of repository: what `kubectl create secret docker-registry`
// writes. The errors never show a credential.
func AuthFromDockerConfig(data []byte, repository string) (authn.Authenticator, error) {
	repo, err := name.NewRepository(repository)
	if err != nil {
		return nil, fmt.Errorf("%q is not a registry repository: %w", repository, err)
	}
	var cfg struct {
		Auths map[string]struct {
			Username string `json:"username"`
			Password string `json:"password"`
			Auth     string `json:"auth"`
		} `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, errors.New("the registry Secret's .dockerconfigjson is not JSON: make it with kubectl create secret docker-registry")
	}
	host := repo.RegistryStr()
	for _, key := range []string{host, "https://" + host, "http://" + host} {
		a, ok := cfg.Auths[key]
		if !ok {
			continue
		}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			user, pass, found := strings.Cut(string(raw), ":")
			if err != nil || !found {
				return nil, fmt.Errorf("the registry Secret's auth for %s is not base64 of user:password", host)
			}
			return &authn.Basic{Username: user, Password: pass}, nil
		}
		return &authn.Basic{Username: a.Username, Password: a.Password}, nil
	}
	return nil, fmt.Errorf("the registry Secret holds no credentials for %s: add them with kubectl create secret docker-registry --docker-server=%s", host, host)
}

// fileLayer is an archive spooled to a file, as a layer pushed unchanged
// (no compression: an encrypted archive does not compress).
type fileLayer struct {
	path   string
	digest v1.Hash
	size   int64
}

func (l *fileLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.path) }
func (l *fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return ArchiveLayerMediaType, nil }
