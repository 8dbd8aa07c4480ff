#!/usr/bin/env bash
# verify-generated.sh regenerates the DeepCopy code, the CRD/RBAC manifests,
# the API reference (docs/) and the installer (dist/install.yaml from
# config/default, dist/target-access.yaml from config/target-access) and
# fails, naming the files, when they differ from what was there: generated
# files must be committed in step with the Go types, markers and kustomize
# sources they come from.
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(api config/crd/bases config/rbac config/admission docs dist/install.yaml dist/target-access.yaml)
before="$(mktemp -d)"
trap 'rm -rf "${before}"' EXIT
for p in "${paths[@]}"; do
  mkdir -p "${before}/$(dirname "$p")"
  # A file that is not there yet counts as changed (it is generated below).
  if [[ -e "$p" ]]; then cp -r "$p" "${before}/$p"; else touch "${before}/$p"; fi
done
# The installer is checked at the Makefile's default image, the one committed.
env -u IMG make --no-print-directory generate manifests docs dist >/dev/null
changed=0
for p in "${paths[@]}"; do
  if ! diff -r "${before}/$p" "$p" >/dev/null; then
    diff -ru "${before}/$p" "$p" | head -40 >&2 || true
    changed=1
  fi
done
if [[ ${changed} -ne 0 ]]; then
  echo "generated files were out of date (shown above); they are regenerated now: review and commit them" >&2
  exit 1
fi
echo "generated files are up to date" >&2
