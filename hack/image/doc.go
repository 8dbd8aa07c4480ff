// Package image builds the manager's container image without a container
// engine, and hands its binary to the tests.
//
// The image is made with go-containerregistry from the same sources and the
// same `go build` flags as the Dockerfile's builder stage: one layer holding
// the static binary /manager on an empty base, run as user 65532. It is
// written as one docker-save tarball per platform (what `docker load -i` and
// `kind load image-archive` accept) and pushed as one multi-platform index.
// The tests that run the operator as installed take its binary out of the
// host platform's tarball, so what is shipped is what is tested.
//
// This package never pulls a base image and never talks to a Docker engine:
// the only network it uses is the registry a user pushes to.
package image
