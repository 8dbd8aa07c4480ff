#!/usr/bin/env bash
# test-times.sh LOG COMMAND...: runs a `go test` command, its output shown as
# it comes and kept in LOG, then prints each package's result and time,
# slowest first, so that a run close to CI's limit says where the time went.
# Exits with the command's status.
set -uo pipefail
log="$1"
shift
mkdir -p "$(dirname "${log}")"
"$@" 2>&1 | tee "${log}"
status=${PIPESTATUS[0]}
echo
echo "== time per package (slowest first) =="
# "ok  <pkg>  12.3s" and "FAIL  <pkg>  12.3s": the time is the last field.
awk '($1 == "ok" || $1 == "FAIL") && $NF ~ /^[0-9.]+s$/ { t = $NF; sub(/s$/, "", t); printf "%9.1fs  %-4s %s\n", t, $1, $2 }' "${log}" | sort -rn
exit "${status}"
