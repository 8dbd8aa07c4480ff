#!/usr/bin/env bash
# go-install-tool.sh installs a Go tool at a pinned version from the Go module
# proxy to a versioned path, so that bumping the version rebuilds it.
# Usage: hack/go-install-tool.sh <target-path> <package> <version>
set -euo pipefail
target="$1" pkg="$2" version="$3"
[[ -x "${target}" ]] && exit 0
echo "[tools] building ${pkg}@${version}" >&2
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
GOBIN="${tmp}" go install "${pkg}@${version}"
mv "${tmp}/$(basename "${pkg%/v[0-9]*}")" "${target}" 2>/dev/null || mv "${tmp}"/* "${target}"
