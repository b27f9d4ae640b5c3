#!/usr/bin/env bash
# demo.sh up|seeds-day|down: the README's first command. Provisions the machine, starts the local
# Kubernetes cluster (hack/env-kube.sh), installs sunk and a Slurm cluster with a 3-node NodeSet
# and an autoscaled one (burst) from the Helm charts, waits until Slurm's nodes are idle, runs a first batch job from the login
# pod and prints its output. A second run on a warm machine only checks that all of it is there.
# `seeds-day`, on a running demo, plays the day the product is for (docs/autoscaling.md, "The
# seeds' day"), step by step: a training job grows NodeSet burst from zero, an inference
# Deployment through sunk-scheduler preempts it, Slurm requeues it, it runs again once the
# inference scales back to 0, and burst is parked again when idle.
#   SUNK_DEMO_NAMESPACE (slurm) the Slurm cluster's namespace; the release and cluster are "demo"
#   SUNK_DEMO_TIMEOUT (600)     seconds to wait for the cluster to be ready
#   SUNK_DEMO_DIRECTORY (true)  false: no companion directory and no login pools (the soak's)
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
  seeds-day) ;;
  down)
    # The Slurm cluster goes first, while its operator still runs (compute pods carry its finalizer).
    if hack/env-kube.sh status >/dev/null 2>&1; then
      helm uninstall "$NAME" -n "$NS" --wait --timeout 2m >/dev/null 2>&1 || true
      kubectl delete namespace "$NS" --ignore-not-found --timeout=2m >/dev/null 2>&1 || true
    fi
    hack/env-kube.sh down; exit ;;
  up) ;;
  *) die "usage: $0 up|seeds-day|down" ;;
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
# as_user runs a Slurm command in the login pod as nobody, from /tmp: the cluster refuses root's
# jobs (DisableRootJobs=YES), and root there is Slurm's admin.
as_user() { login runuser -u nobody -- sh -c 'cd /tmp && exec "$@"' sh "$@"; }

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
# SPREAD lets compute's members onto the test bed's extra machines (hack/kube-nodes.sh taints
# them for the e2e tests, whose controllers run on the host): the NodeSet spreads its members
# over machines, so the first job's `srun hostname` runs on three. Stated again with nodeSets[0].
SPREAD="nodeSets[0].tolerations[0].key=testbed.sunk.dev/extra-node,nodeSets[0].tolerations[0].operator=Exists,nodeSets[0].tolerations[0].effect=NoSchedule"

# The chart's companion directory (directory.enabled) with two users of group analysts, each of
# whom gets a login pod of their own (login.pools, docs/login.md): `kubectl sunk logins` lists
# them, and `kubectl -n slurm exec -it demo-login-users-ada-0 -- bash` is a shell as ada.
DIRECTORY=(--set directory.enabled=true
  --set-json 'directory.users=[{"name":"ada","uid":20001,"groups":["analysts"]},{"name":"grace","uid":20002,"groups":["analysts"]}]'
  --set-json 'directory.groups=[{"name":"analysts","gid":20100}]'
  --set-json 'login.pools=[{"name":"users","group":"analysts","home":{"size":"1Gi"}}]')
[ "${SUNK_DEMO_DIRECTORY:-true}" != false ] || DIRECTORY=()

install_slurm() {
  helm upgrade --install "$NAME" charts/slurm -n "$NS" --create-namespace "${DIRECTORY[@]}" \
    --set "nodeSets[0].name=compute,nodeSets[0].mode=Replicas,nodeSets[0].replicas=$NODES,$SPREAD,$BURST"
}

run_job() {
  local id state out
  # The shared claim's root is root's alone (0750 from the hostpath provisioner): users get in,
  # and a directory they may write.
  login sh -c 'chmod 755 /shared && mkdir -p -m 1777 /shared/scratch'
  id=$(as_user sbatch --parsable -N$NODES -J demo -D /shared/scratch -o "/shared/scratch/demo-%j.out" --wrap 'srun hostname | sort')
  log "job $id submitted: sbatch -N$NODES --wrap 'srun hostname | sort'"
  local deadline=$(( $(date +%s) + 120 ))
  while :; do
    state=$(login scontrol -o show job "$id" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $state in COMPLETED) break ;; FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
      die "job $id ended $state: $(login scontrol show job "$id")" ;; esac
    [ "$(date +%s)" -lt "$deadline" ] || die "job $id did not finish in 120s (state $state)"
    sleep 0.5
  done
  out=$(login cat "/shared/scratch/demo-$id.out")
  printf -- '--- output of job %s (/shared/scratch/demo-%s.out):\n%s\n' "$id" "$id" "$out"
}

# seeds_day: the seeds' day on the running demo. It enables sunk-scheduler for the cluster,
# gives it preemption (partition_prio, CANCEL) and two partitions of NodeSet burst, train
# (PreemptMode=REQUEUE) and serve (tier 10), which namespace inference may use with preemption,
# and then plays the day; the settings stay (make demo-down removes them with the rest).
INFERENCE_NS=inference
seeds_day() {
  status || die "the demo is not up (make demo): $STATUS"
  local sunk_stamp
  sunk_stamp=$(cat "$SUNK_CACHE/stamps/image-sunk")
  phase "sunk-scheduler for cluster $NAME" helm upgrade sunk charts/sunk -n "$SUNK_NS" --reuse-values --wait --timeout 5m \
    --set scheduler.enabled=true --set "scheduler.cluster.name=$NAME" --set "scheduler.cluster.namespace=$NS" \
    --set-string "scheduler.podAnnotations.sunk\.dev/image-stamp=$sunk_stamp"
  kubectl create namespace "$INFERENCE_NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  phase "partitions train and serve on burst" helm upgrade "$NAME" charts/slurm -n "$NS" --reuse-values \
    --set-json 'preemption={"type":"partition_prio","mode":"CANCEL"}' \
    --set-json 'partitions=[{"name":"main","default":true},{"name":"train","nodeSets":["burst"],"priorityTier":1,"extraConf":"PreemptMode=REQUEUE"},{"name":"serve","nodeSets":["burst"],"priorityTier":10}]' \
    --set-json "schedulerPolicy={\"tenants\":[{\"name\":\"inference\",\"namespaces\":[\"$INFERENCE_NS\"],\"partitions\":[\"serve\"],\"preempt\":true}]}"
  phase "slurmctld with the new partitions" wait_for "partition serve in slurmctld" 300 sh -c "kubectl -n $NS exec $NAME-login-0 -c login -- scontrol -o show partition serve 2>/dev/null | grep -q 'PriorityTier=10'"
  phase "burst parked (at zero)" wait_for "NodeSet burst at zero" 300 burst_parked
  local job
  job=$(as_user sbatch --parsable -p train -N2 --exclusive -J training --wrap 'trap "exit 0" USR1; sleep 3600 & wait')
  log "training job $job submitted: sbatch -p train -N2 --exclusive"
  phase "burst grows, the training job runs" wait_for "job $job running" 300 job_is "$job" RUNNING
  show
  inference_deployment | kubectl apply -f - >/dev/null
  phase "inference 0 → 2 (sunk-scheduler)" inference_scale 2
  phase "the training job requeued" wait_for "job $job requeued" 120 job_is "$job" PENDING
  show
  login scontrol update jobid="$job" StartTime=now  # rather than wait out cred_expire (120 s)
  phase "inference 2 → 0, training again" inference_down_training_again "$job"
  show
  login scancel --batch --signal=USR1 "$job"
  phase "training done" wait_for "job $job completed" 120 job_is "$job" COMPLETED
  login scontrol -o show job "$job" | grep -o 'JobState=[A-Z]* Reason=[^ ]* Dependency=[^ ]* Requeue=[0-9] Restarts=[0-9]*' || true
  phase "burst parked again" wait_for "NodeSet burst at zero" 300 burst_parked
  kubectl -n "$INFERENCE_NS" delete deployment inference >/dev/null
  echo "--- events of NodeSet burst:"
  kubectl -n "$NS" get events --field-selector involvedObject.name=burst,involvedObject.kind=NodeSet -o custom-columns=REASON:.reason,MESSAGE:.message | tail -n 8
  echo "--- timings:"
  printf '  %s\n' "${phases[@]}"
}

burst_parked() { [ "$(kubectl -n "$NS" get nodeset burst -o jsonpath='{.status.parked}')" = 2 ] && [ -z "$(kubectl -n "$NS" get pods -l sunk.dev/nodeset=burst -o name)" ]; }
job_is() { [ "$(login squeue -h -j "$1" -o %T 2>/dev/null)" = "$2" ] || login scontrol -o show job "$1" 2>/dev/null | grep -q "JobState=$2 "; }
show() { echo "--- squeue:"; login squeue -o '%.6i %.9P %.24j %.8T %.6D %R'; kubectl -n "$INFERENCE_NS" get pods -o wide 2>/dev/null || true; }

# inference_down_training_again JOB: the inference gone, the requeued training job runs again.
inference_down_training_again() {
  inference_scale 0
  wait_for "job $1 running again" 300 job_is "$1" RUNNING
}

# inference_scale N: the Deployment at N replicas, and wait until N pods run (or none is left).
inference_scale() {
  kubectl -n "$INFERENCE_NS" scale deployment inference --replicas="$1" >/dev/null
  if [ "$1" = 0 ]; then
    wait_for "no inference pod" 120 sh -c "[ -z \"\$(kubectl -n $INFERENCE_NS get pods -l app=inference -o name)\" ]"
  else
    wait_for "$1 inference pods running" 300 sh -c "[ \"\$(kubectl -n $INFERENCE_NS get pods -l app=inference --field-selector=status.phase=Running -o name | wc -l)\" = $1 ]"
  fi
}

# inference_deployment: a model served across two nodes, one gang of two pods in partition serve.
inference_deployment() {
  cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: inference, namespace: $INFERENCE_NS}
spec:
  replicas: 0
  selector: {matchLabels: {app: inference}}
  template:
    metadata:
      labels: {app: inference}
      annotations: {sunk.dev/partition: serve, sunk.dev/gang: inference, sunk.dev/gang-size: "2"}
    spec:
      schedulerName: sunk-scheduler
      terminationGracePeriodSeconds: 0
      containers:
        - {name: model, image: docker.io/library/busybox:local, imagePullPolicy: Never, command: [sleep, "3600"],
           resources: {requests: {cpu: 10m, memory: 16Mi}}}
YAML
}

if [ "${1:-up}" = seeds-day ]; then seeds_day; exit; fi

phase "provisioning (hack/provision.sh all)" hack/provision.sh all
phase "starting Kubernetes (env-kube.sh)" hack/env-kube.sh up cluster
phase "installing charts sunk and slurm" install_charts
phase "waiting for Slurm" wait_ready
phase "running a first job" run_job
if [ ${#DIRECTORY[@]} -gt 0 ]; then
  phase "a login pod each for ada and grace" wait_for "the login pods of pool users Ready" 300 sh -c \
    "[ \"\$(kubectl -n $NS get statefulsets -l sunk.dev/login-pool=users -o jsonpath='{range .items[*]}{.status.readyReplicas}{end}')\" = 11 ]"
fi
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
  kubectl -n $NS exec -it $NAME-login-users-ada-0 -- bash     # a shell as ada, in her own login pod
  kubectl sunk -n $NS logins              # every login pod with its user (the directory's ada and grace)
  helm -n $NS upgrade $NAME charts/slurm --reuse-values --set "nodeSets[0].name=compute,nodeSets[0].mode=Replicas,nodeSets[0].replicas=5,$SPREAD,$BURST"   # scale it (Helm replaces the whole list)
  kubectl -n $NS get nodesets -o wide     # NodeSet burst grows when jobs wait for nodes, and shrinks when idle
  make demo-seeds-day                     # training grows burst, inference through sunk-scheduler preempts it, it runs again
Tear down:
  make demo-down
MSG
