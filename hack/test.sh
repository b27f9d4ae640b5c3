#!/usr/bin/env bash
# test.sh: the README's test command (`make test`). Provisions what is missing, checks the code,
# then runs unit, integration (real Slurm, real kube-apiserver) and end-to-end (real kubelet)
# tests. Environments this run started are stopped at the end; ones already up are left up.
source "$(dirname "$0")/lib.sh"
cd "$SUNK_ROOT"

# Every run ends with a table of its stages and their wall times, and its ten slowest tests
# (from go test -v's "--- PASS: TestX (12.34s)" lines), whether it passed or not: where the time
# went is the first thing a slow or failed run is asked. Each stage's output is also kept in
# report_dir for that.
report_dir=$(mktemp -d "${TMPDIR:-/tmp}/sunk-test.XXXXXX")
# Each finished stage is a line "NAME SECONDS RC" in $report_dir/stages: a file, not a variable,
# because the stages of a chain (below) run in a subshell beside the script.
run_start=$SECONDS
# stage NAME CMD...: runs CMD (its output shown and kept), and records its wall time. The copy
# goes through a process substitution, not a pipe: a daemon that CMD leaves running (the test
# beds) keeps its output open, and the script would wait on a pipe's tee for ever. In a chain
# (stage_quiet=1) the output is only kept, and shown when the chain has ended, so that two
# suites' lines do not interleave.
stage_quiet=0
stage() {
  local name=$1 start=$SECONDS rc=0; shift
  log "stage: $name"
  # In the background and waited for: a subshell in an `||` list would run with set -e off.
  if [ "$stage_quiet" = 1 ]; then
    echo "$name" >>"$report_dir/quiet" # show_quiet_logs prints it
    (set -e; "$@") >"$report_dir/$name.log" 2>&1 &
  else
    (set -e; "$@") > >(tee "$report_dir/$name.log") 2>&1 &
  fi
  wait $! || rc=$?
  echo "$name $((SECONDS - start)) $rc" >>"$report_dir/stages"
  return "$rc"
}
# failed_tests prints each failed test of the stage logs with the last lines it logged (its
# t.Fatal message comes last): the end of a failed run is often all of it that is read (CI keeps
# its tail), and the message that says why may be thousands of lines above. A test's lines stop
# counting at the e2e tests' "[diagnostics]" marker (dumpNamespaceOf), which a failed test's
# cleanup logs after its failure, followed by events and logs that would push the message out.
failed_tests() {
  awk '
    # A message of several lines goes on in lines indented by 8 spaces: up to 5 of them are kept.
    cont != "" && /^        / && k < 5 { last[cont, n[cont] % 3] = last[cont, n[cont] % 3] "\n    " substr($0, 1, 200); k++; next }
    { cont = "" }
    /^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
    /^ +[A-Za-z0-9_]+_test\.go:[0-9]+: \[diagnostics\] / && cur != "" { done[cur] = 1; next }
    /^ +[A-Za-z0-9_]+_test\.go:[0-9]+: / && cur != "" && !done[cur] { n[cur]++; last[cur, n[cur] % 3] = substr($0, 1, 400); cont = cur; k = 0; next }
    /^ *--- FAIL: / {
      t = $3; from = FILENAME; sub(/.*\//, "", from); sub(/\.log$/, "", from)
      printf "  %s (%s)\n", t, from
      for (i = n[t] - 2; i <= n[t]; i++) if (i > 0) print "    " last[t, i % 3]
    }' "$report_dir"/*.log 2>/dev/null || true
}
# keep_logs keeps a failed run's stage logs in SUNK_CACHE/test-reports (the newest five runs):
# the run's temporary directory goes at its end, and a rare failure must be readable afterwards.
keep_logs() {
  local dir
  dir=$SUNK_CACHE/test-reports/$(date +%Y%m%d-%H%M%S)
  mkdir -p "$dir" && cp "$report_dir"/*.log "$dir"/ 2>/dev/null || return 0
  ls -1d "$SUNK_CACHE"/test-reports/*/ | sort -r | tail -n +6 | xargs -r rm -rf
  printf '[sunk] the stage logs of this failed run: %s\n' "${dir/#$HOME/\~}"
}
# report prints the table and the slowest tests; of a failed run (rc, default 0), its failed
# tests with their last messages, and where its logs are kept.
report() {
  local name secs rc failed=${1:-0}
  printf '\n[sunk] stages (wall time; stages of a chain ran beside the stages after it started):\n'
  while read -r name secs rc; do
    printf '  %-34s %5d s  %2d:%02d  %s\n' "$name" "$secs" $((secs / 60)) $((secs % 60)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
  done < <(cat "$report_dir/stages" 2>/dev/null)
  local total=$((SECONDS - run_start))
  printf '  %-34s %5d s  %2d:%02d\n' "whole run" "$total" $((total / 60)) $((total % 60))
  printf '[sunk] slowest tests:\n'
  grep -HE '^--- (PASS|FAIL): Test[^ ]+ \([0-9.]+s\)' "$report_dir"/*.log 2>/dev/null |
    sed -E 's#^.*/([^/]+)\.log:--- (PASS|FAIL): (Test[^ ]+) \(([0-9.]+)s\)#\4 \2 \3 \1#' |
    sort -rn | head -10 | while read -r secs result test from; do
      printf '  %8.1f s  %-4s  %s (%s)\n' "$secs" "$result" "$test" "$from"
    done || true
  if [ "$failed" != 0 ]; then
    printf '[sunk] failed tests and their last messages:\n'
    failed_tests
    keep_logs
  fi
  rm -rf "$report_dir"
}
# show_quiet_logs prints the output of the stages that ran quiet, each whole, in the order they
# started.
show_quiet_logs() {
  local name
  while read -r name; do log "output of stage $name:"; cat "$report_dir/$name.log"; done < <(cat "$report_dir/quiet" 2>/dev/null)
}
# kill_tree PID...: stops PID and everything it started (a chain's go test and its children).
kill_tree() {
  local p c
  for p; do
    for c in $(pgrep -P "$p" 2>/dev/null); do kill_tree "$c"; done
    kill "$p" 2>/dev/null || true
  done
}

trap 'report $?' EXIT # until cleanup (below) takes over, which reports too
stage provision hack/provision.sh all
stage provision-rootfs-26.05 env SUNK_SLURM_VERSION=26.05 hack/provision.sh rootfs

lint() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  [ -z "$unformatted" ] || die "gofmt needed on: $unformatted"
  go vet -tags integration,e2e ./...
  helm lint --strict charts/sunk charts/slurm
  # sunk-scheduler imports k8s.io/kubernetes and is its own module (scheduler/go.mod), which
  # the root module's ./... does not enter.
  (cd scheduler && go build ./... && go vet -tags integration ./...)
}
stage lint lint

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
e2e_pid= chain_pids=
cleanup() {
  local rc=$? e p
  # A chain still running (the run failed or was stopped beside it) goes before its beds.
  for p in $chain_pids; do kill_tree "$p"; wait "$p" 2>/dev/null || true; done
  report "$rc"
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
environments() {
  hack/env-slurm.sh up
  hack/env-kube.sh up cluster
  SUNK_SLURM_VERSION=26.05 hack/env-slurm.sh up
}
stage environments environments

# The end-to-end tests run in two parts. Their shared part first, alone: the tests that keep to
# their own namespace and Slurm cluster, three at a time (-parallel 3). They keep both cores
# busy, and every other suite beside them starved their clusters' pods (slurmctld, mariadb) past
# their deadlines: eight e2e failures and the e2e timeout in a run with sunk-scheduler's
# integration tests beside them, three in a run with a compile beside them (2026-11-29), and the
# load average at 80 with the unit and integration tests beside them (a 26.05 slurmctld pair then
# hung in hand-back, the probe-orphan hang of docs/slurmcluster.md).
# The exclusive part: the tests that change the one kubelet node (cordon, drain, node lock) or
# install cluster-wide releases, one at a time: a test that does not call parallel(t) first.
# They mostly wait (the machine was 60 % idle under them), so they run beside the integration
# chains below. -skip and -run take the same list, so a test is in exactly one part.
# Each part runs in a process group of its own, waited for, so that a stopped run stops it
# (cleanup). -v: each test's duration and progress lines, which the log of a failed run needs.
exclusive_e2e=$(awk '/^func Test/ { name = $2; sub(/\(.*/, "", name); getline l; if (l !~ /parallel\(t\)/) print name }' test/e2e/*_test.go | paste -sd'|')
[ -n "$exclusive_e2e" ] || die "no exclusive e2e test found (test/e2e: a Test func whose first line is not parallel(t))"
log "stage: e2e-shared"
e2e_rc=0 e2e_start=$SECONDS
setsid go test -tags e2e -count=1 -v -parallel 3 -timeout 50m ${SUNK_TEST_ARGS:-} -skip "^($exclusive_e2e)\$" ./test/e2e/ > >(tee "$report_dir/e2e-shared.log") 2>&1 &
e2e_pid=$!
wait "$e2e_pid" || e2e_rc=$?
e2e_pid=
echo "e2e-shared $((SECONDS - e2e_start)) $e2e_rc" >>"$report_dir/stages"
[ "$e2e_rc" = 0 ] || die "end-to-end tests failed (exit $e2e_rc)"

# Then three chains at once, each a list of stages; their CPU is not the machine's (their Slurm
# daemons, apiservers and clusters mostly wait). One after the other the integration stages took
# 785 + 178 + 249 s; the first two chains' first stages beside each other 427 and 388 s.
# - The shared chain, here: the suites on the 24.11 Slurm test bed, one package at a time (-p 1:
#   integration packages share the bed; one at a time keeps a test's view of "unchanged" or
#   "idle" from being disturbed by another package's jobs), then sunk-scheduler's.
# - The private chain, beside it: test/integration/operator (its own apiservers, an in-memory
#   Slurm and slurmctlds of its own, test/privateslurm), then pkg/slurm against the 26.05 test
#   bed (the fast layer on Slurm 26.05, docs/testbed.md: every REST version it serves; the e2e
#   clusters run 26.05, the default of new clusters; TestUpgrade2411To2605 starts one on 24.11).
# - The exclusive e2e tests, on the local cluster, which nothing else uses meanwhile. Then, on
#   the same cluster, a short soak (docs/soak.md) on the demo's releases: churn, scale 3→40→3
#   and a SIGKILL of every component, judged by the bounds of a short run. It installs the
#   releases and removes them again unless they were there before. SUNK_SOAK_DURATION=0 skips
#   it. Run alone after the rest, it made the whole run about 2,870 s; here, beside the shared
#   chain, whose suites use apiservers and Slurm beds of their own, not this cluster, 2,505 and
#   2,638 s (2026-11-29), the soak itself slower by a fifth.
# -v: each test's duration, for the report.
operator_pkg=./test/integration/operator
private_chain() {
  stage_quiet=1
  local rc=0
  stage operator-integration go test -tags integration -count=1 -v -timeout 30m ${SUNK_TEST_ARGS:-} "$operator_pkg" || rc=$?
  stage integration-slurm-26.05 env SUNK_SLURM_VERSION=26.05 go test -tags integration -count=1 -v -timeout 10m ${SUNK_TEST_ARGS:-} ./test/integration/slurm/ || rc=$?
  return "$rc"
}
# SUNK_TEST_ARGS comes before this part's -run, which wins: a -run of SUNK_TEST_ARGS filters the
# other suites, not this one (go test takes one -run).
soak() {
  go vet -tags soak ./test/soak
  DURATION=${SUNK_SOAK_DURATION:-5m} SUNK_SOAK_CLEANUP=1 test/soak/run.sh
}
exclusive_chain() {
  stage_quiet=1
  stage e2e-exclusive go test -tags e2e -count=1 -v -timeout 30m ${SUNK_TEST_ARGS:-} -run "^($exclusive_e2e)\$" ./test/e2e/ || return
  if [ "${SUNK_SOAK_DURATION:-5m}" != 0 ]; then stage "soak-${SUNK_SOAK_DURATION:-5m}" soak; fi
}
private_chain &
chain_pids=$!
exclusive_chain &
chain_pids+=" $!"
shared_rc=0
stage unit-and-integration go test -tags integration -count=1 -v -p 1 -timeout 30m ${SUNK_TEST_ARGS:-} $(go list -tags integration ./... | grep -vx "sunk.dev/sunk/${operator_pkg#./}") || shared_rc=$?
scheduler_tests() { cd scheduler && go test -tags integration -count=1 -v -p 1 -timeout 20m ${SUNK_TEST_ARGS:-} ./...; }
[ "$shared_rc" != 0 ] || stage scheduler-integration scheduler_tests || shared_rc=$?
log "waiting for the chains beside it"
chains_rc=0
for pid in $chain_pids; do wait "$pid" || chains_rc=$?; done
chain_pids=
show_quiet_logs
[ "$shared_rc" = 0 ] || die "unit, integration or scheduler tests failed (exit $shared_rc)"
[ "$chains_rc" = 0 ] || die "operator integration, Slurm 26.05, exclusive e2e tests or the soak failed (exit $chains_rc)"
log "all tests passed"
