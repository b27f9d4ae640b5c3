#!/usr/bin/env bash
# gen-slurm-openapi.sh [fetch|generate|all]: the typed slurmrestd clients of pkg/slurm/openapi.
#
#   fetch     asks the test bed's real Slurm (hack/env-slurm.sh) for the OpenAPI specs that
#             `slurmrestd --generate-openapi-spec` prints for each data parser version, and stores
#             them as pkg/slurm/openapi/<version>/openapi.json (checked in).
#   generate  runs the pinned oapi-codegen (hack/tools/codegen) on the checked-in specs; this needs
#             no Slurm, so `go generate ./pkg/slurm/...` and CI can rerun it offline.
#   all       (default) both.
#
# The specs are used exactly as Slurm prints them: oapi-codegen v2.5.0 accepts both. v0.0.41
# inlines every schema (7 named components, the rest are anonymous structs in Go); v0.0.42 names
# ~100 components. pkg/slurm maps every version onto its own types from one template
# (pkg/slurm/internal/adaptergen), so a new data parser version is one more directory here, a row
# of that generator's version table and a case in slurm.New.
source "$(dirname "$0")/lib.sh"
VERSIONS=${SUNK_SLURM_API_VERSIONS:-"v0.0.41 v0.0.42"}
OUT=$SUNK_ROOT/pkg/slurm/openapi

fetch() {
  "$SUNK_ROOT/hack/env-slurm.sh" up
  local v dir tmp
  for v in $VERSIONS; do
    dir=$OUT/$(echo "$v" | tr -d .)
    mkdir -p "$dir"
    tmp=$(mktemp)
    "$SUNK_ROOT/hack/env-slurm.sh" exec slurmrestd --generate-openapi-spec -s openapi/slurmctld -d "$v" > "$tmp"
    # Fail on an empty or non-JSON answer rather than check in garbage.
    go run "$SUNK_ROOT/pkg/slurm/openapi/internal/checkspec" "$v" < "$tmp" || { rm -f "$tmp"; die "bad spec for $v"; }
    chmod 644 "$tmp"; mv "$tmp" "$dir/openapi.json"
    log "fetched $v spec ($(wc -c < "$dir/openapi.json") bytes)"
  done
}

generate() {
  local oc=$SUNK_BIN/oapi-codegen v pkg dir
  [ -x "$oc" ] || "$SUNK_ROOT/hack/provision.sh" tools || die "oapi-codegen missing; run hack/provision.sh"
  for v in $VERSIONS; do
    pkg=$(echo "$v" | tr -d .)
    dir=$OUT/$pkg
    "$oc" -generate types,client -package "$pkg" -o "$dir/zz_generated.go" "$dir/openapi.json"
    log "generated $dir/zz_generated.go"
  done
}

case ${1:-all} in
  fetch) fetch ;;
  generate) generate ;;
  all) fetch; generate ;;
  *) die "usage: $0 [fetch|generate|all]" ;;
esac
