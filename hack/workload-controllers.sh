#!/usr/bin/env bash
# workload-controllers.sh build | install | uninstall: the controllers of the gang workloads
# sunk-scheduler recognises (docs/scheduler.md, "Gangs"), at the versions whose labels
# pkg/wellknown/workloads.go reads, run on the test bed as users run them: as pods, from each
# project's own Helm chart, with webhooks.
#
#   build      each manager binary from its Go module at the pinned version, static, into
#              $SUNK_CACHE/build/workloads/<name>-<version>/manager, and packed as
#              the release's image name (registry.k8s.io/jobset/jobset:v0.10.1, ...) into
#              $SUNK_IMAGES, from where hack/env-kube.sh pushes it to the test bed's registry
#              and every node pulls it, as it does sunk's own images. Stamped: a warm machine
#              skips it. hack/provision.sh workloads (and all, and env-kube.sh up cluster)
#              calls it. JobSet builds with its module's own go.mod (every dependency as
#              upstream's release build has it). LWS builds in sunk-scheduler's module (a tool
#              directive there): its release is on k8s.io 0.33.3 and controller-runtime v0.21.0,
#              the scheduler's tree is 0.33.13 with the same controller-runtime, so a patch-level
#              step lets a cold machine compile 68 packages of its own instead of its whole tree
#              (about 3 minutes of CPU); the tree's versions are the scheduler's replace blocks.
#   install    build, ship the images to the running cluster's nodes (hack/env-kube.sh images),
#              then `helm upgrade --install` each module's own chart (charts/ of the module at
#              that version, CRDs included) into <name>-system, and wait until its webhooks
#              admit: a server-side dry run of a sample object passes them.
#   uninstall  remove both releases and their namespaces (JobSet's CRD stays, as Helm leaves a
#              chart's crds/; LWS's is a template of its chart and goes with it).
source "$(dirname "$0")/lib.sh"
export KUBECONFIG=${KUBECONFIG:-$SUNK_STATE/kube/admin.kubeconfig}

# NAME: module, version, the module's go.sum line for it (checked, as a go.sum would), main
# package, the image's name, the chart's directory in the module. A new version changes these
# and the version named in pkg/wellknown/workloads.go together.
CONTROLLERS=(jobset lws)
declare -A MODULE=([jobset]=sigs.k8s.io/jobset [lws]=sigs.k8s.io/lws)
declare -A VERSION=([jobset]=v0.10.1 [lws]=v0.7.0)
declare -A SUM=([jobset]=h1:u8QKifNsrWVrlRFe6w2ofYTqFT9ma2DRHxfeB2m9xyU= [lws]=h1:qWfzX8+UBak+Hq0+m/PuE3uO0mp/3dmm5q/h/7z31A8=)
declare -A MAIN=([jobset]=. [lws]=sigs.k8s.io/lws/cmd)
# A module of ours to build in instead of the module's own directory (see build above).
declare -A BUILD_IN=([lws]=scheduler)
declare -A IMAGE=([jobset]=registry.k8s.io/jobset/jobset [lws]=registry.k8s.io/lws/lws)
declare -A CHART=([jobset]=charts/jobset [lws]=charts/lws)

# module_info NAME: the module at its version in Go's module cache (downloaded through the Go
# module proxy on first use), as `go mod download -json` prints it; refuses a module whose hash
# is not the pinned one.
module_info() {
  local n=$1 info sum
  info=$(cd "$SUNK_CACHE" && go mod download -json "${MODULE[$n]}@${VERSION[$n]}") ||
    die "downloading ${MODULE[$n]}@${VERSION[$n]} failed: $info"
  sum=$(json_field Sum <<<"$info")
  [ "$sum" = "${SUM[$n]}" ] || die "${MODULE[$n]}@${VERSION[$n]} has hash $sum, want ${SUM[$n]}"
  echo "$info"
}
json_field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}$/\1/p" | head -n 1; }
module_dir() { module_info "$1" | json_field Dir; }

ref_of() { echo "${IMAGE[$1]}:${VERSION[$1]}"; }

# ldflags NAME: what the project's own Makefile stamps (pkg/version's GitVersion and GitCommit,
# the commit from the module proxy's origin record), without symbols.
ldflags() {
  local n=$1 commit
  commit=$(module_info "$n" | json_field Hash)
  echo "-s -w -X ${MODULE[$n]}/pkg/version.GitVersion=${VERSION[$n]} -X ${MODULE[$n]}/pkg/version.GitCommit=${commit:-unknown}"
}

build_inputs() { # NAME
  local n=$1
  echo "${MODULE[$n]}@${VERSION[$n]} ${SUM[$n]} ${MAIN[$n]} $(ref_of "$n") $(ldflags "$n") CGO_ENABLED=$CGO_ENABLED GOFLAGS=$GOFLAGS"
  cat "$SUNK_ROOT/hack/mkimage.sh"
  if [ -n "${BUILD_IN[$n]:-}" ]; then cat "$SUNK_ROOT/${BUILD_IN[$n]}/go.mod" "$SUNK_ROOT/${BUILD_IN[$n]}/go.sum"; fi
}

build_one() { # NAME
  local n=$1 dir out tar start=$SECONDS
  out=$SUNK_CACHE/build/workloads/$n-${VERSION[$n]} tar=$SUNK_IMAGES/$n.tar
  stamp_ok "workload-$n" <(build_inputs "$n") && [ -x "$out/manager" ] && [ -f "$tar" ] && return 0
  dir=$(module_dir "$n")
  [ -z "${BUILD_IN[$n]:-}" ] || dir=$SUNK_ROOT/${BUILD_IN[$n]}
  log "building the $n controller ${VERSION[$n]} from ${MODULE[$n]} (cold: minutes; cached afterwards)"
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  # In the module's own directory its go.mod and go.sum choose every dependency (the module cache
  # is read-only, which a build does not mind); in BUILD_IN's, that module's do.
  (cd "$dir" && go build -ldflags "$(ldflags "$n")" -o "$out.tmp/manager" "${MAIN[$n]}")
  # The release images are distroless/static with /manager, user 65532 (the charts run it so).
  "$SUNK_ROOT/hack/mkimage.sh" "$out.tmp" "$(ref_of "$n")" "$tar" '["/manager"]'
  rm -rf "$out" && mv "$out.tmp" "$out"
  stamp_set "workload-$n" <(build_inputs "$n")
  log "built and packed $(ref_of "$n") in $((SECONDS - start)) s"
}

build() {
  mkdir -p "$SUNK_IMAGES"
  local n
  for n in "${CONTROLLERS[@]}"; do build_one "$n"; done
}

# values NAME: the chart's values for the test bed. The image as built above, pulled once from
# the test bed's registry (the charts default to Always, and to tags of the projects' own
# staging); requests small enough for the test bed's two-CPU nodes (upstream's: 500m and 1 CPU
# with 1Gi); the user 65532 the release images declare, which hack/mkimage.sh's images do not
# (the charts' runAsNonRoot wants a numeric user).
values() {
  case $1 in
    jobset) echo "--set image.repository=${IMAGE[jobset]} --set image.tag=${VERSION[jobset]} --set image.pullPolicy=IfNotPresent
      --set controller.resources.requests.cpu=10m --set controller.resources.requests.memory=64Mi
      --set controller.podSecurityContext.runAsUser=65532" ;;
    lws) echo "--set image.manager.repository=${IMAGE[lws]} --set image.manager.tag=${VERSION[lws]} --set image.manager.pullPolicy=IfNotPresent
      --set resources.requests.cpu=10m --set resources.requests.memory=64Mi
      --set podSecurityContext.runAsUser=65532" ;;
  esac
}

# sample NAME: an object whose creation each of the controller's webhooks for that kind must
# admit (defaulting and validation), for a server-side dry run.
sample() {
  case $1 in
    jobset) cat <<'YAML' ;;
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: webhook-probe, namespace: default}
spec:
  replicatedJobs:
    - name: w
      template:
        spec:
          template:
            spec:
              restartPolicy: Never
              containers: [{name: c, image: docker.io/library/busybox:local, command: ["true"]}]
YAML
    lws) cat <<'YAML' ;;
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: webhook-probe, namespace: default}
spec:
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers: [{name: c, image: docker.io/library/busybox:local, command: ["true"]}]
YAML
  esac
}

webhooks_admit() { sample "$1" | kubectl create --dry-run=server -f - >/dev/null 2>&1; }

install() {
  local n dir start=$SECONDS pids=() p
  build
  "$SUNK_ROOT/hack/env-kube.sh" images
  for n in "${CONTROLLERS[@]}"; do
    dir=$(module_dir "$n")
    # Both at once: each waits mostly for its pod and its certificate.
    # shellcheck disable=SC2046 # values are words
    helm upgrade --install "$n" "$dir/${CHART[$n]}" -n "$n-system" --create-namespace \
      $(values "$n") --wait --timeout 3m >/dev/null & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || die "installing the workload controllers failed"; done
  log "both releases deployed (helm --wait) in $((SECONDS - start)) s"
  # The managers make their webhook certificate themselves (cert-controller), write it to the
  # Secret the pod mounts and the CA into the webhook configurations; the pod serves it once
  # kubelet has refreshed the mounted Secret (up to its sync period). Until then every
  # admission fails (failurePolicy Fail), so the release is ready when a dry run passes.
  for n in "${CONTROLLERS[@]}"; do
    wait_for "the $n webhooks to admit" 180 webhooks_admit "$n" ||
      { kubectl -n "$n-system" get pods -o wide >&2; kubectl -n "$n-system" logs --all-containers --tail 20 -l app.kubernetes.io/name="$n" >&2; return 1; }
  done
  log "workload controllers installed: $(for n in "${CONTROLLERS[@]}"; do printf '%s ' "$(ref_of "$n")"; done)in $((SECONDS - start)) s"
}

uninstall() {
  local n
  for n in "${CONTROLLERS[@]}"; do
    helm uninstall "$n" -n "$n-system" --ignore-not-found >/dev/null
    kubectl delete namespace "$n-system" --ignore-not-found --wait=false >/dev/null
  done
}

case ${1:-} in
  build) build ;;
  install) with_lock workload-controllers install ;;
  uninstall) with_lock workload-controllers uninstall ;;
  *) die "usage: $0 build | install | uninstall" ;;
esac
