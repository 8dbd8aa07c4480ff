#!/usr/bin/env bash
# verify-generated.sh regenerates the DeepCopy code, the CRD/RBAC manifests,
# the API reference (docs/) and the installer (dist/install.yaml) and fails,
# naming the files, when they differ from what was there: generated files must
# be committed in step with the Go types and markers they come from.
set -euo pipefail
cd "$(dirname "$0")/.."
paths=(api config/crd/bases config/rbac docs dist/install.yaml)
before="$(mktemp -d)"
trap 'rm -rf "${before}"' EXIT
for p in "${paths[@]}"; do mkdir -p "${before}/$(dirname "$p")"; cp -r "$p" "${before}/$p"; done
# The installer is checked at the Makefile's default image, the one committed.
env -u IMG make --no-print-directory generate manifests docs build-installer >/dev/null
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
