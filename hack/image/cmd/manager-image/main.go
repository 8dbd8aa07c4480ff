// Command manager-image builds and pushes the manager's container image
// without Docker; it is what `make image` and `make image-push` run.
//
//	manager-image build -img move-operator:dev -platforms linux/amd64,linux/arm64 -dir bin/image
//	manager-image push  -img registry.example/move-operator:v1 -platforms linux/amd64,linux/arm64 -dir bin/image
//
// build writes one docker-save tarball per platform into -dir. push sends
// the images of those tarballs, as they are, to -img as one multi-platform
// index: what was written (and tested) is what is pushed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/move-operator/move-operator/hack/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "manager-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "build" && args[0] != "push") {
		return fmt.Errorf("usage: manager-image build|push [-img name:tag] [-platforms list] [-dir directory]")
	}
	verb := args[0]
	flags := flag.NewFlagSet(verb, flag.ContinueOnError)
	ref := flags.String("img", image.DefaultRef, "image name and tag")
	platformList := flags.String("platforms", image.DefaultPlatforms, "comma-separated platforms")
	dir := flags.String("dir", "bin/image", "directory of the tarballs")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	platforms, err := image.ParsePlatforms(*platformList)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	switch verb {
	case "build":
		root, err := image.ModuleRoot()
		if err != nil {
			return err
		}
		paths, err := image.WriteTarballs(ctx, root, *ref, platforms, *dir)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Printf("wrote %s (%s)\n", p, *ref)
		}
	case "push":
		var images []v1.Image
		for _, p := range platforms {
			img, err := loadTagged(filepath.Join(*dir, image.TarballName(p)), *ref)
			if err != nil {
				return err
			}
			images = append(images, img)
		}
		if err := image.Push(ctx, *ref, images); err != nil {
			return err
		}
		fmt.Printf("pushed %s (%d platforms)\n", *ref, len(images))
	}
	return nil
}

// loadTagged reads the image tagged ref from a tarball of `make image`, so
// that pushing a name other than the one built is refused rather than
// silently pushing an image built for another name.
func loadTagged(path, ref string) (v1.Image, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return nil, fmt.Errorf("image name %q is not a tag (registry/repository:tag): %w", ref, err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		return nil, fmt.Errorf("reading %s (run make image with the same IMG first): %w", path, err)
	}
	return img, nil
}
