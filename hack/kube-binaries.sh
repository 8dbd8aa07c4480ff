#!/usr/bin/env bash
# kube-binaries.sh builds the Kubernetes components that the local management
# clusters run (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok) from the Go module proxy, and caches each one outside the work tree,
# keyed by component and version, so that a second run costs nothing.
#
# Nothing is downloaded except Go modules: on these machines the module proxy
# is the only registry for Go code, and no prebuilt binary can be fetched.
#
# Usage: hack/kube-binaries.sh [component...]   (default: all)
# Prints the directory that holds the binaries on its last line (stdout), so
#   KUBEBIN=$(hack/kube-binaries.sh | tail -1)
# Progress goes to stderr.
#
# KUBE_VERSION=1.33 builds the Kubernetes components of the oldest release
# the tests run (test/olderkubernetes) into a directory of their own, with
# the same etcd and kwok (linked from the default directory when built there).
set -euo pipefail

# Versions are pinned together: Kubernetes v1.36.3 matches the k8s.io v0.36.3
# libraries the project builds against; etcd v3.6.14 is what cluster-api
# v1.14.2 pins its client to. Kubernetes 1.33 is a release before
# MutatingAdmissionPolicy (v1 from 1.36), where the creator annotates their
# MoveOperations themselves; its patch is one whose k8s.io staging modules
# the module proxy serves whole (some of v0.33.7's are missing there).
case "${KUBE_VERSION:-}" in
  ""|1.36) KUBE_VERSION=v1.36.3 ;;
  1.33) KUBE_VERSION=v1.33.13 ;;
esac
ETCD_VERSION="${ETCD_VERSION:-v3.6.14}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"

CACHE_ROOT="${MOVE_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/move-operator}"
BIN_DIR="${CACHE_ROOT}/bin/kube-${KUBE_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}"
mkdir -p "${BIN_DIR}"

log() { printf '[kube-binaries] %s\n' "$*" >&2; }

# staging_minor turns v1.36.3 into v0.36.3, the version of the k8s.io staging
# modules released together with that Kubernetes version.
staging_version() { echo "v0.${KUBE_VERSION#v1.}"; }

# build_in_module creates a throwaway module under a temp dir, lets the caller
# prepare it (function $2), then builds package $3 to ${BIN_DIR}/$1.
build_in_module() {
  local name="$1" prepare="$2" pkg="$3" ldflags="${4:-}"
  local out="${BIN_DIR}/${name}"
  if [[ -x "${out}" ]]; then
    log "${name}: cached at ${out}"
    return 0
  fi
  if reuse "${name}"; then
    return 0
  fi
  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/move-operator-build-${name}.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '${dir}'" RETURN
  log "${name}: building ${pkg} (first time only; this takes minutes)"
  local start=${SECONDS}
  (
    cd "${dir}"
    go mod init "local.invalid/build-${name}" >/dev/null 2>&1
    "${prepare}"
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${ldflags}" -o "${out}.tmp" "${pkg}"
  )
  mv "${out}.tmp" "${out}"
  log "${name}: built in $((SECONDS - start))s"
}

# reuse links a file that does not depend on the Kubernetes version (etcd,
# kwok, kwok's stages) from the directory of another Kubernetes version with
# the same etcd and kwok, instead of building it again.
reuse() {
  local name="$1" other
  for other in "${CACHE_ROOT}"/bin/kube-*-etcd-"${ETCD_VERSION}"-kwok-"${KWOK_VERSION}"/"${name}"; do
    [[ "${name}" == kube-* || ! -s "${other}" || "${other}" == "${BIN_DIR}/${name}" ]] && continue
    ln -f "${other}" "${BIN_DIR}/${name}" 2>/dev/null ||
      { cp "${other}" "${BIN_DIR}/${name}.tmp" && mv "${BIN_DIR}/${name}.tmp" "${BIN_DIR}/${name}"; }
    log "${name}: taken from ${other}"
    return 0
  done
  return 1
}

prepare_kubernetes() {
  local sv; sv="$(staging_version)"
  go mod edit -require "k8s.io/kubernetes@${KUBE_VERSION}"
  # k8s.io/kubernetes replaces every staging module with a path inside its own
  # repository; outside it those must point at the published releases.
  local mod
  mod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  for staging in $(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "${mod}"); do
    go mod edit -replace "${staging}=${staging}@${sv}"
  done
}

kube_ldflags() {
  local v="${KUBE_VERSION#v}"
  local major="${v%%.*}" rest="${v#*.}"
  local minor="${rest%%.*}"
  # A plain build reports v0.0.0-master on /version, which clusterctl and
  # anything else that checks the server version refuses.
  echo "-X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} \
-X k8s.io/component-base/version.gitMajor=${major} \
-X k8s.io/component-base/version.gitMinor=${minor} \
-X k8s.io/component-base/version.gitTreeState=clean"
}

prepare_etcd() {
  go mod edit -require "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
}

prepare_kwok() {
  go mod edit -require "sigs.k8s.io/kwok@${KWOK_VERSION}"
}

build_component() {
  case "$1" in
    etcd) build_in_module etcd prepare_etcd . ;;
    kube-apiserver|kube-controller-manager|kube-scheduler)
      build_in_module "$1" prepare_kubernetes "k8s.io/kubernetes/cmd/$1" "$(kube_ldflags)" ;;
    kwok)
      build_in_module kwok prepare_kwok sigs.k8s.io/kwok/cmd/kwok
      write_kwok_stages ;;
    *) log "unknown component $1 (want etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)"; exit 2 ;;
  esac
}

# write_kwok_stages concatenates the "fast" node and pod Stage documents that
# the kwok module ships; kwok needs them passed with --config to move nodes and
# pods through their lifecycle.
write_kwok_stages() {
  local out="${BIN_DIR}/kwok-stages.yaml"
  [[ -s "${out}" ]] && return 0
  reuse kwok-stages.yaml && return 0
  local dir
  dir="$(cd "${TMPDIR:-/tmp}" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  : > "${out}.tmp"
  for f in "${dir}"/kustomize/stage/node/fast/*.yaml "${dir}"/kustomize/stage/pod/fast/*.yaml; do
    [[ "$(basename "$f")" == kustomization.yaml ]] && continue
    printf -- '---\n' >> "${out}.tmp"
    cat "$f" >> "${out}.tmp"
    printf '\n' >> "${out}.tmp"
  done
  mv "${out}.tmp" "${out}"
  log "kwok: stages written to ${out}"
}

components=("$@")
if [[ ${#components[@]} -eq 0 ]]; then
  components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
fi
for c in "${components[@]}"; do
  build_component "$c"
done
echo "${BIN_DIR}"
