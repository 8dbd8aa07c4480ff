package image

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index gathers per-platform images into one multi-platform index, each
// entry carrying the platform of its image's config, which is what a node's
// runtime matches when it pulls. Docker media types, like the images: those
// read from docker-save tarballs are Docker schema 2.
func Index(images []v1.Image) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	seen := map[string]bool{}
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("reading an image config: %w", err)
		}
		p := cfg.Platform()
		if p == nil || p.OS == "" || p.Architecture == "" {
			return nil, fmt.Errorf("an image has no OS and architecture in its config")
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("two images for %s: an index holds one per platform", p.String())
		}
		seen[p.String()] = true
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.DockerManifestList)
	return mutate.AppendManifests(idx, adds...), nil
}

// Push pushes images as one multi-platform index tagged ref, with the
// credentials of the default keychain (~/.docker/config.json, or
// $DOCKER_CONFIG, and the credential helpers it names). opts come after the
// defaults and so may override them, e.g. the transport in a test.
func Push(ctx context.Context, ref string, images []v1.Image, opts ...remote.Option) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q is not a tag (registry/repository:tag): %w", ref, err)
	}
	idx, err := Index(images)
	if err != nil {
		return err
	}
	all := append([]remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
	}, opts...)
	if err := remote.WriteIndex(tag, idx, all...); err != nil {
		return fmt.Errorf("pushing the image index to %s: %w", tag.String(), err)
	}
	return nil
}
