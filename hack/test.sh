#!/usr/bin/env bash
# test.sh: the README's test command (`make test`). Provisions what is missing, checks the code,
# then runs unit, integration (real Slurm, real kube-apiserver) and end-to-end (real kubelet)
# tests. Environments this run started are stopped at the end; ones already up are left up.
source "$(dirname "$0")/lib.sh"
cd "$SUNK_ROOT"

"$SUNK_ROOT/hack/provision.sh" all
SUNK_SLURM_VERSION=26.05 "$SUNK_ROOT/hack/provision.sh" rootfs

log "lint: gofmt, go vet, helm lint"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || die "gofmt needed on: $unformatted"
go vet -tags integration,e2e ./...
helm lint --strict charts/sunk charts/slurm
# sunk-scheduler imports k8s.io/kubernetes and is its own module (scheduler/go.mod), which the
# root module's ./... does not enter.
(cd scheduler && go build ./... && go vet -tags integration ./...)

# The environments: the 24.11 Slurm test bed, the cluster, and the 26.05 Slurm test bed (for
# the fast layer on the newer release, below).
envs=(slurm kube slurm-26.05)
env_cmd() {
  case $1 in
    slurm-26.05) SUNK_SLURM_VERSION=26.05 hack/env-slurm.sh "${@:2}" ;;
    *) "hack/env-$1.sh" "${@:2}" ;;
  esac
}
started=()
for e in "${envs[@]}"; do env_cmd "$e" status >/dev/null 2>&1 || started+=("$e"); done
e2e_pid=
cleanup() {
  local rc=$? e
  # The run was stopped while the end-to-end tests ran: stop them (their whole process group)
  # before their cluster goes.
  if [ -n "$e2e_pid" ] && kill -0 "$e2e_pid" 2>/dev/null; then
    kill -- -"$e2e_pid" 2>/dev/null || true; wait "$e2e_pid" 2>/dev/null || true
    log "end-to-end tests stopped"
  fi
  for e in "${started[@]}"; do env_cmd "$e" down || rc=1; done
  # When this run owned every environment, stopping them must leave the host as it was.
  if [ ${#started[@]} -eq ${#envs[@]} ]; then hack/leftovers.sh || rc=1; fi
  exit $rc
}
trap cleanup EXIT
hack/env-slurm.sh up
hack/env-kube.sh up cluster
SUNK_SLURM_VERSION=26.05 hack/env-slurm.sh up

# The end-to-end tests first, alone: on a 2-core machine every other suite beside them starved
# their clusters' pods (slurmctld, mariadb) past their deadlines: eight e2e failures and the
# e2e timeout in a run with sunk-scheduler's integration tests beside them, and the load average
# at 80 with the unit and integration tests alone beside them (a 26.05 slurmctld pair then hung
# in hand-back, the probe-orphan hang of docs/slurmcluster.md).
# -parallel 3: within test/e2e, the tests that keep to their own namespace and Slurm cluster run
# three at a time once the ones that change the shared node (cordon, drain, node lock) are done.
# They run in a process group of their own, waited for, so that a stopped run stops them (cleanup).
# -v: each test's duration and progress lines, which the log of a failed run needs.
log "tests: end-to-end"
e2e_rc=0
setsid go test -tags e2e -count=1 -v -parallel 3 -timeout 50m ${SUNK_TEST_ARGS:-} ./test/e2e/ &
e2e_pid=$!
wait "$e2e_pid" || e2e_rc=$?
e2e_pid=
[ "$e2e_rc" = 0 ] || die "end-to-end tests failed (exit $e2e_rc)"
log "tests: unit and integration"
# -p 1: integration packages share one Slurm test bed; running them one at a time keeps
# a test's view of "unchanged" or "idle" from being disturbed by another package's jobs.
go test -tags integration -count=1 -p 1 -timeout 30m ${SUNK_TEST_ARGS:-} ./...
# The fast layer on Slurm 26.05 (docs/testbed.md): pkg/slurm against the 26.05 test bed, every
# REST version it serves, about 100 s warm. The e2e clusters run 26.05, the default of new
# clusters; TestUpgrade2411To2605 starts one on 24.11.
log "tests: integration on Slurm 26.05"
SUNK_SLURM_VERSION=26.05 go test -tags integration -count=1 -timeout 10m ${SUNK_TEST_ARGS:-} ./test/integration/slurm/
log "tests: sunk-scheduler integration"
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
