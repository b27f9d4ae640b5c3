#!/usr/bin/env bash
# push-images.sh REGISTRY [TAG]: push the images hack/images.sh built to REGISTRY, under the names
# the charts read (docs/user-guide.md §1): $REGISTRY/sunk:$TAG, $REGISTRY/slurm:26.05-$TAG,
# $REGISTRY/slurm:24.11-$TAG and $REGISTRY/slapd:$TAG (the slurm chart's directory). TAG defaults to the chart's appVersion. skopeo pushes (no Docker
# daemon): credentials from `skopeo login REGISTRY`; REGISTRY_TLS_VERIFY=false for a registry
# served over plain HTTP or with a certificate this machine does not trust.
source "$(dirname "$0")/lib.sh"
registry=${1:?usage: $0 REGISTRY [TAG]}
tag=${2:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$SUNK_ROOT/charts/sunk/Chart.yaml")}
[ -n "$tag" ] || die "no TAG given and no appVersion in charts/sunk/Chart.yaml"
pids=()
push() { # TARBALL NAME
  [ -f "$SUNK_IMAGES/$1" ] || die "no $SUNK_IMAGES/$1: run hack/provision.sh images (make images) first"
  log "pushing $registry/$2"
  skopeo copy -q --dest-tls-verify="${REGISTRY_TLS_VERIFY:-true}" "docker-archive:$SUNK_IMAGES/$1" "docker://$registry/$2" & pids+=($!)
}
push sunk.tar "sunk:$tag"
push slurm-26.05.tar "slurm:26.05-$tag"
push slurm.tar "slurm:24.11-$tag"
push slapd.tar "slapd:$tag"
for p in "${pids[@]}"; do wait "$p" || die "pushing to $registry failed"; done
log "pushed $registry/sunk:$tag, $registry/slurm:26.05-$tag, $registry/slurm:24.11-$tag and $registry/slapd:$tag"
