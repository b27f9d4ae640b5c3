#!/bin/bash
# node-usage.sh [SECS]: CPU (% of one core) and RSS of each test-bed node's daemons (kubelet, containerd, kube-proxy, kube-router) over SECS.
source "$(dirname "$0")/lib.sh"
E=$SUNK_STATE/kube; secs=${1:-60}
sfx() { [ "$1" = sunk-node ] && echo "" || echo "-$1"; }
pids_of() { local d f; for d in kubelet kube-proxy kube-router containerd; do f=$E/pids/$d$(sfx $1); [ -f $f ] && pgrep -g "$(cat $f)"; done; }
ticks() { local s=0 p; for p in "$@"; do s=$((s + $(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null || echo 0))); done; echo $s; }
rss() { local s=0 p; for p in "$@"; do s=$((s + $(awk '/VmRSS/{print $2}' /proc/$p/status 2>/dev/null || echo 0))); done; echo $((s/1024)); }
nodes=$(KUBECONFIG=$E/admin.kubeconfig kubectl get nodes -o name -l '!type' | cut -d/ -f2)
declare -A A
for n in $nodes; do A[$n]=$(ticks $(pids_of $n)); done
sleep $secs
for n in $nodes; do p=$(pids_of $n); t=$(ticks $p)
  echo "bench: node=$n idle_cpu_pct_of_core=$(awk -v a=${A[$n]} -v b=$t -v s=$secs 'BEGIN{printf "%.2f", (b-a)/s}') rss_mib=$(rss $p)"; done
