#!/usr/bin/env bash
# demo.sh up|down: the local test bed with a real Slurm and a real Kubernetes node, and a first
# job. (The Helm-installed Slurm-in-Kubernetes demo grows out of this.)
source "$(dirname "$0")/lib.sh"
cd "$SUNK_ROOT"

case ${1:-up} in
  down) hack/env-kube.sh down; hack/env-slurm.sh down; exit ;;
  up) ;;
  *) die "usage: $0 up|down" ;;
esac

hack/provision.sh all
hack/env-slurm.sh up
hack/env-kube.sh up cluster
log "submitting a 3-node batch job to Slurm"
id=$(hack/env-slurm.sh exec sbatch --parsable -N3 -D /shared -o /shared/demo-%j.out --wrap 'srun hostname | sort')
wait_for "job $id to finish" 120 sh -c "hack/env-slurm.sh exec scontrol show job $id | grep -q 'JobState=COMPLETED'" ||
  die "job $id did not complete: $(hack/env-slurm.sh exec scontrol show job "$id")"
echo "--- job $id output:"
cat "$SUNK_STATE/slurm/shared/demo-$id.out"
echo "--- Slurm nodes:"
hack/env-slurm.sh exec sinfo -N
echo "--- Kubernetes nodes:"
KUBECONFIG=$SUNK_STATE/kube/admin.kubeconfig kubectl get nodes -o wide
cat <<MSG

Try it:
  hack/env-slurm.sh exec sinfo            # or sbatch, srun, scontrol, squeue
  export KUBECONFIG=$SUNK_STATE/kube/admin.kubeconfig PATH=$SUNK_BIN:\$PATH; kubectl get pods -A
Tear down:
  make demo-down
MSG
