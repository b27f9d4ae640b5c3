#!/usr/bin/env bash
# leftovers.sh: fail, listing them, if stopped environments left anything on the host:
# processes, mounts, network namespaces, links, iptables chains and rules, cgroups or hard-coded paths.
source "$(dirname "$0")/lib.sh"
found=0
report() { [ -z "$2" ] || { printf '%s:\n%s\n' "$1" "$2" >&2; found=1; }; }
report processes "$(pgrep -af '(^|/)(slurmctld|slurmd|slurmrestd|slurmstepd|etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kube-router|containerd|kwok|docker-registry)( |$)' | grep -v defunct || true)"
report mounts "$(findmnt -rn -o TARGET | grep -E "^($SUNK_STATE|/run/netns|/var/lib/kubelet)" || true)"
report "network namespaces" "$(ip netns list 2>/dev/null | grep -E '^(sunk-|cni-)' || true)"
report links "$(ip -o link show 2>/dev/null | grep -oE ' (sunk0|sunk-slurm0|sunk-slurm26|sunk-sn[0-9]+|sunk-s26n[0-9]+|sunk-kn0|sunk-kv[0-9]+|veth[0-9a-f]+)[@:]' || true)"
report "iptables chains" "$(for t in filter nat mangle; do iptables -t $t -S 2>/dev/null | grep -E '^-N (KUBE-|CNI-)'; done || true)"
report "iptables rules" "$(iptables -S 2>/dev/null | grep -E -- '-d 10\.96\.0\.0/16 .*-j REJECT' || true)"   # env-kube.sh service_guard
report "nat rules" "$(iptables -t nat -S PREROUTING 2>/dev/null | grep -F 'sunk: untranslated Service IP' || true)"   # env-kube.sh refuse_untranslated
report "nat rules" "$(iptables -t nat -S POSTROUTING 2>/dev/null | grep -F 'sunk: pod egress' || true)"   # kube-nodes.sh pod_egress
report ipsets "$(ipset list -n 2>/dev/null | grep -E '^(inet6:)?(KUBE-|kube-router)' || true)"   # env-kube.sh clean_netpol
report cgroups "$(ls -d /sys/fs/cgroup/*/sunk /sys/fs/cgroup/sunk /sys/fs/cgroup/*/sunk-node-* /sys/fs/cgroup/sunk-node-* 2>/dev/null || true)"
report paths "$(ls -d /var/lib/kubelet /var/lib/cni /run/containerd "$SUNK_STATE"/kube "$SUNK_STATE"/slurm "$SUNK_STATE"/slurm-26.05 "$HOSTPATH_PV" 2>/dev/null || true)"
[ $found = 0 ] && log "no leftovers"
exit $found
