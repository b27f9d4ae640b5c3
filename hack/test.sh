#!/usr/bin/env bash
# test.sh: the README's test command (`make test`). Provisions what is missing, checks the code,
# then runs unit, integration (real Slurm, real kube-apiserver) and end-to-end (real kubelet)
# tests. Environments this run started are stopped at the end; ones already up are left up.
source "$(dirname "$0")/lib.sh"
cd "$SUNK_ROOT"

"$SUNK_ROOT/hack/provision.sh" all

log "lint: gofmt, go vet, helm lint"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || die "gofmt needed on: $unformatted"
go vet -tags integration,e2e ./...
helm lint --strict charts/sunk charts/slurm
# sunk-scheduler imports k8s.io/kubernetes and is its own module (scheduler/go.mod), which the
# root module's ./... does not enter.
(cd scheduler && go build ./... && go vet -tags integration ./...)

started=()
hack/env-slurm.sh status >/dev/null 2>&1 || started+=(slurm)
hack/env-kube.sh status >/dev/null 2>&1 || started+=(kube)
cleanup() {
  local rc=$? e
  for e in "${started[@]}"; do hack/env-$e.sh down || rc=1; done
  # When this run owned both environments, stopping them must leave the host as it was.
  if [ ${#started[@]} -eq 2 ]; then hack/leftovers.sh || rc=1; fi
  exit $rc
}
trap cleanup EXIT
hack/env-slurm.sh up
hack/env-kube.sh up cluster

# -p 1: integration packages share one Slurm and one cluster; running them one at a time keeps
# a test's view of "unchanged" or "idle" from being disturbed by another package's jobs.
log "tests: unit, integration, end-to-end"
go test -tags integration,e2e -count=1 -p 1 -timeout 40m ${SUNK_TEST_ARGS:-} ./...
(cd scheduler && go test -tags integration -count=1 -p 1 -timeout 20m ${SUNK_TEST_ARGS:-} ./...)
# A short soak (docs/soak.md) on the demo's cluster: churn, scale 3→40→3 and a SIGKILL of every
# component, judged by the same bounds as the full run. It installs the demo's releases and
# removes them again unless they were there before. SUNK_SOAK_DURATION=0 skips it.
if [ "${SUNK_SOAK_DURATION:-5m}" != 0 ]; then
  log "soak: DURATION=${SUNK_SOAK_DURATION:-5m}"
  go vet -tags soak ./test/soak
  DURATION=${SUNK_SOAK_DURATION:-5m} SUNK_SOAK_CLEANUP=1 test/soak/run.sh
fi
log "all tests passed"
