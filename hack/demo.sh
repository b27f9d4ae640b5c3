#!/usr/bin/env bash
# demo.sh up|down: the README's first command. Provisions the machine, starts the local
# Kubernetes cluster (hack/env-kube.sh), installs sunk and a Slurm cluster with a 3-node NodeSet
# and an autoscaled one (burst) from the Helm charts, waits until Slurm's nodes are idle, runs a first batch job from the login
# pod and prints its output. A second run on a warm machine only checks that all of it is there.
#   SUNK_DEMO_NAMESPACE (slurm) the Slurm cluster's namespace; the release and cluster are "demo"
#   SUNK_DEMO_TIMEOUT (600)     seconds to wait for the cluster to be ready
source "$(dirname "$0")/lib.sh"
cd "$SUNK_ROOT"
export KUBECONFIG=$SUNK_STATE/kube/admin.kubeconfig
NS=${SUNK_DEMO_NAMESPACE:-slurm}
SUNK_NS=sunk-system
NAME=demo
NODES=3
T0=$(date +%s)
phases=()

case ${1:-up} in
  down)
    # The Slurm cluster goes first, while its operator still runs (compute pods carry its finalizer).
    if hack/env-kube.sh status >/dev/null 2>&1; then
      helm uninstall "$NAME" -n "$NS" --wait --timeout 2m >/dev/null 2>&1 || true
      kubectl delete namespace "$NS" --ignore-not-found --timeout=2m >/dev/null 2>&1 || true
    fi
    hack/env-kube.sh down; exit ;;
  up) ;;
  *) die "usage: $0 up|down" ;;
esac

# phase DESC CMD...: run one step and remember how long it took.
phase() {
  local desc=$1 t; shift
  t=$(date +%s)
  log "$desc"
  "$@"
  phases+=("$(printf '%-34s %4ss' "$desc" $(( $(date +%s) - t )))")
}

login() { kubectl -n "$NS" exec "$NAME-login-0" -c login -- "$@"; }

# status: one line on how far the cluster got; true once every part is ready.
status() {
  local ready reason nodes idle
  ready=$(kubectl -n "$NS" get slurmcluster "$NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)
  reason=$(kubectl -n "$NS" get slurmcluster "$NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null)
  nodes=$(kubectl -n "$NS" get nodeset compute -o jsonpath='{.status.ready}' 2>/dev/null)
  idle=0
  if [ "$ready" = True ]; then
    idle=$(login sinfo -h -N -o '%t' 2>/dev/null | grep -c '^idle$' || true)
  fi
  STATUS="SlurmCluster Ready=${ready:-?} (${reason:-waiting}) · compute pods ready ${nodes:-0}/$NODES · Slurm nodes idle $idle/$NODES"
  [ "$ready" = True ] && [ "${nodes:-0}" -ge $NODES ] && [ "$idle" -ge $NODES ]
}

# wait_ready: poll status until it holds or the deadline passes, showing each change.
wait_ready() {
  local secs=${SUNK_DEMO_TIMEOUT:-600} start last=""
  start=$(date +%s)
  until status; do
    [ "$STATUS" = "$last" ] || { printf '  [%4ss] %s\n' $(( $(date +%s) - start )) "$STATUS" >&2; last=$STATUS; }
    if [ $(( $(date +%s) - start )) -ge "$secs" ]; then
      kubectl -n "$NS" get slurmcluster,nodeset,pods -o wide >&2 || true
      die "the Slurm cluster was not ready within ${secs}s"
    fi
    sleep 1
  done
  printf '  [%4ss] %s\n' $(( $(date +%s) - start )) "$STATUS" >&2
}

install_charts() {
  # The image's stamp as a pod annotation: a rebuilt sunk.dev/sunk:local (same tag) rolls the
  # controllers.
  local stamp
  stamp=$(cat "$SUNK_CACHE/stamps/image-sunk")
  helm upgrade --install sunk charts/sunk -n "$SUNK_NS" --create-namespace --wait --timeout 5m \
    --set-string "operator.podAnnotations.sunk\.dev/image-stamp=$stamp,syncer.podAnnotations.sunk\.dev/image-stamp=$stamp" >/dev/null
  # Helm installs CRDs only on first install; apply them so that a changed API reaches a running cluster.
  kubectl apply --server-side --force-conflicts -f charts/sunk/crds/ >/dev/null
  # The webhook's Service may take a moment to reach the new operator pod: retry until a
  # deadline, then once more to show the error.
  wait_for "the slurm chart to install" 60 install_slurm || install_slurm
}

# BURST is the demo's second NodeSet, sized by Slurm's queue (docs/autoscaling.md): up to 2
# nodes when jobs wait for nodes, parked again 30 s after they are idle. Helm's --set on a list
# element replaces the whole list: every upgrade that sets nodeSets[0] states it again.
BURST="nodeSets[1].name=burst,nodeSets[1].mode=Replicas,nodeSets[1].autoscaling.maxReplicas=2,nodeSets[1].autoscaling.idleAfter=30s"

install_slurm() {
  helm upgrade --install "$NAME" charts/slurm -n "$NS" --create-namespace \
    --set "nodeSets[0].name=compute,nodeSets[0].mode=Replicas,nodeSets[0].replicas=$NODES,$BURST"
}

run_job() {
  local id state out
  id=$(login sbatch --parsable -N$NODES -J demo -D /shared -o "/shared/demo-%j.out" --wrap 'srun hostname | sort')
  log "job $id submitted: sbatch -N$NODES --wrap 'srun hostname | sort'"
  local deadline=$(( $(date +%s) + 120 ))
  while :; do
    state=$(login scontrol -o show job "$id" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $state in COMPLETED) break ;; FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
      die "job $id ended $state: $(login scontrol show job "$id")" ;; esac
    [ "$(date +%s)" -lt "$deadline" ] || die "job $id did not finish in 120s (state $state)"
    sleep 0.5
  done
  out=$(login cat "/shared/demo-$id.out")
  printf -- '--- output of job %s (/shared/demo-%s.out):\n%s\n' "$id" "$id" "$out"
}

phase "provisioning (hack/provision.sh all)" hack/provision.sh all
phase "starting Kubernetes (env-kube.sh)" hack/env-kube.sh up cluster
phase "installing charts sunk and slurm" install_charts
phase "waiting for Slurm" wait_ready
phase "running a first job" run_job
echo "--- Slurm release (sinfo --version in the login pod; the slurm chart's slurmVersion):"
login sinfo --version
echo "--- Slurm nodes (sinfo):"
login sinfo -N
echo "--- pods:"
kubectl get pods -n "$SUNK_NS"; kubectl get pods -n "$NS" -o wide
echo "--- timings:"
printf '  %s\n' "${phases[@]}"
printf '  %-34s %4ss\n' total $(( $(date +%s) - T0 ))
cat <<MSG

Your Slurm cluster "$NAME" runs in namespace $NS. Next:
  export KUBECONFIG=$KUBECONFIG PATH=$SUNK_BIN:\$PATH
  kubectl -n $NS exec -it $NAME-login-0 -c login -- bash     # a shell: sinfo, sbatch, srun, squeue
  helm -n $NS upgrade $NAME charts/slurm --reuse-values --set "nodeSets[0].name=compute,nodeSets[0].mode=Replicas,nodeSets[0].replicas=5,$BURST"   # scale it (Helm replaces the whole list)
  kubectl -n $NS get nodesets -o wide     # NodeSet burst grows when jobs wait for nodes, and shrinks when idle
Tear down:
  make demo-down
MSG
