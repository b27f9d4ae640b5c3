#!/usr/bin/env bash
# gen-slurm-openapi.sh [fetch|generate|all]: the typed slurmrestd clients of pkg/slurm/openapi.
#
#   fetch     asks the test bed's real Slurm (hack/env-slurm.sh) for the OpenAPI specs that
#             `slurmrestd --generate-openapi-spec` prints for each data parser version, and stores
#             them as pkg/slurm/openapi/<version>/openapi.json (checked in). Each version comes
#             from the Slurm release named beside it in VERSIONS (its test bed is started if it is
#             down): v0.0.41 is served by 24.11 only, v0.0.43 and later by 26.05 only.
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
# RELEASE:VERSION, the release whose slurmrestd the spec of VERSION is fetched from.
VERSIONS=${SUNK_SLURM_API_VERSIONS:-"24.11:v0.0.41 24.11:v0.0.42 26.05:v0.0.43 26.05:v0.0.44 26.05:v0.0.45"}
OUT=$SUNK_ROOT/pkg/slurm/openapi

fetch() {
  local rv r v dir tmp
  for rv in $VERSIONS; do
    r=${rv%%:*} v=${rv#*:}
    SUNK_SLURM_VERSION=$r "$SUNK_ROOT/hack/env-slurm.sh" up
    dir=$OUT/$(echo "$v" | tr -d .)
    mkdir -p "$dir"
    tmp=$(mktemp)
    SUNK_SLURM_VERSION=$r "$SUNK_ROOT/hack/env-slurm.sh" exec slurmrestd --generate-openapi-spec -s openapi/slurmctld -d "$v" > "$tmp"
    # Fail on an empty or non-JSON answer rather than check in garbage.
    go run "$SUNK_ROOT/pkg/slurm/openapi/internal/checkspec" "$v" < "$tmp" || { rm -f "$tmp"; die "bad spec for $v"; }
    chmod 644 "$tmp"; mv "$tmp" "$dir/openapi.json"
    log "fetched $v spec from Slurm $r ($(wc -c < "$dir/openapi.json") bytes)"
  done
}

generate() {
  local oc=$SUNK_BIN/oapi-codegen rv pkg dir
  [ -x "$oc" ] || "$SUNK_ROOT/hack/provision.sh" codegen || die "oapi-codegen missing; run hack/provision.sh"
  for rv in $VERSIONS; do
    pkg=$(echo "${rv#*:}" | tr -d .)
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
