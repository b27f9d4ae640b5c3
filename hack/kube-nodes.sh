# kube-nodes.sh: the test bed's extra real nodes. Sourced by env-kube.sh, never run.
#
# Node 1 is sunk-node, in the host's network namespace. Nodes 2..N (sunk-node-2, ...) are
# machines of their own as far as Kubernetes and Slurm can tell, as env-slurm.sh's slurmds are:
#   - a network namespace (sunk-knK) with its own address, 10.87.0.(10+K) on the host's bridge
#     sunk-kn0, and its own pod subnet 10.88.(126+K).0/24 that the host routes to it (sunk-node's
#     is 10.88.0.0/17: the cluster's pod network is 10.88.0.0/16, kube-proxy's --cluster-cidr);
#   - its own containerd, kubelet, kube-proxy and kube-router, all inside that namespace, with
#     their own state directory ($ENV_DIR/nodes/NAME) and cgroup root (/NAME);
#   - the labels a GPU cluster's nodes have (NVIDIA topograph's switch tiers and NVLink domain,
#     GPU Feature Discovery's product), so that topology and GRES come from real Node objects;
#   - the taint $EXTRA_NODE_TAINT: a pod lands there only if it asks for several machines. The
#     e2e tests run sunk's controllers in the test process on the host, and a pod's
#     NetworkPolicies admit the host only where it is the pod's own node (kube-router accepts
#     local sources first), as in any cluster: every other test keeps its pods on sunk-node.
# "A machine failing" is node_fail: its network cut, kubelet, containerd, kube-proxy,
# kube-router and every container of it killed, as a power cut leaves them; node_restore boots
# it again (its pods' containers come back as kubelet recreates them).

KUBE_NODES=${SUNK_KUBE_NODES:-3}
NODES_NET=10.87.0
NODES_BRIDGE=sunk-kn0
EXTRA_NODE_TAINT=testbed.sunk.dev/extra-node=true:NoSchedule
# sunk-node's share of the pod network; each extra node has a /24 above it.
FIRST_NODE_POD_CIDR=10.88.0.0/17

node_name() { if [ "$1" = 1 ]; then echo sunk-node; else echo "sunk-node-$1"; fi; }
node_index() { case $1 in sunk-node) echo 1 ;; sunk-node-[0-9]*) echo "${1#sunk-node-}" ;; *) die "no test-bed node $1" ;; esac; }
node_ip() { echo "$NODES_NET.$((10 + $1))"; }
node_netns() { echo "sunk-kn$1"; }
node_veth() { echo "sunk-kv$1"; }
node_dir() { echo "$ENV_DIR/nodes/$(node_name "$1")"; }
node_pod_cidr() { echo "10.88.$((126 + $1)).0/24"; }
node_bridge_ip() { echo "10.88.$((126 + $1)).1"; }   # the CNI gateway of node K's pods
in_node() { local k=$1; shift; ip netns exec "$(node_netns "$k")" "$@"; }
node_ctr() { local k=$1; shift; ctr -a "$(node_dir "$k")/containerd/containerd.sock" -n k8s.io "$@"; }

# node_labels K: the labels of node K: NVIDIA topograph's switch tiers and NVLink domain, one
# spine, sunk-node alone on leaf-0 and the extra nodes two a leaf (sunk-node-2 and -3 on leaf-1);
# the extra nodes also GPU Feature Discovery's product and the extra-node label.
node_labels() {
  local leaf=$(( $1 / 2 ))
  printf 'fabric.topograph.run/tier-3=core-1,fabric.topograph.run/tier-2=spine-1,fabric.topograph.run/tier-1=leaf-%s,accelerator.topograph.run/domain=nvl-%s' "$leaf" "$leaf"
  [ "$1" = 1 ] || printf ',nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3,testbed.sunk.dev/extra-node=true'
  echo
}

# node_network K: K's namespace, its address on sunk-kn0 and the host's route to its pods.
node_network() {
  local k=$1 ns veth
  ns=$(node_netns "$k") veth=$(node_veth "$k")
  ip link show "$NODES_BRIDGE" >/dev/null 2>&1 || {
    ip link add "$NODES_BRIDGE" type bridge
    ip addr add "$NODES_NET.1/24" dev "$NODES_BRIDGE"
  }
  ip link set "$NODES_BRIDGE" up
  ip netns list | grep -q "^$ns\b" || {
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$NODES_BRIDGE"
    ip -n "$ns" addr add "$(node_ip "$k")/24" dev eth0
  }
  ip link set "$veth" up
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route replace default via "$NODES_NET.1"
  in_node "$k" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  ip route replace "$(node_pod_cidr "$k")" via "$(node_ip "$k")" dev "$NODES_BRIDGE"
}

# node_certs K: the kubelet's client and serving certificates of node K and its kubeconfig,
# which reaches the apiserver at the host's address (127.0.0.1 is the node's own).
node_certs() {
  local k=$1 name
  name=$(node_name "$k")
  [ -f "$P/kubelet-$name.crt" ] && return 0
  (cd "$P" && issue "kubelet-$name" "/O=system:nodes/CN=system:node:$name" extendedKeyUsage=clientAuth &&
    issue "kubelet-serving-$name" "/CN=$name" "subjectAltName=IP:$(node_ip "$k"),DNS:$name
extendedKeyUsage=serverAuth" && chmod 600 ./*.key)
  client_kubeconfig "kubelet-$name" "https://$NODE_IP:6443"
}

# start_node K: node K booted: network, containerd (images pulled from the registry), kubelet, kube-proxy and
# kube-router, all in its namespace. Returns once the Node is Ready.
start_node() {
  local k=$1 name dir ns
  name=$(node_name "$k") dir=$(node_dir "$k") ns=$(node_netns "$k")
  node_network "$k"
  node_certs "$k"
  configs "$dir" "$name" "$(node_pod_cidr "$k")" "$P/kubelet-serving-$name" "$name"
  cgroups "$name"
  start_bg "containerd-$name" nsenter --net="/run/netns/$ns" containerd --config "$dir/containerd/config.toml"
  wait_for "containerd of $name" 30 node_ctr "$k" version
  pull_images "$k"
  start_bg "kubelet-$name" nsenter --net="/run/netns/$ns" kubelet --config="$dir/kubelet/config.yaml" \
    --kubeconfig="$ENV_DIR/kubelet-$name.kubeconfig" --root-dir="$dir/kubelet/root" \
    --hostname-override="$name" --node-ip="$(node_ip "$k")" \
    --node-labels="$(node_labels "$k")" --register-with-taints="$EXTRA_NODE_TAINT"
  in_node "$k" bash -c "$(declare -f service_guard); SERVICE_CIDR=$SERVICE_CIDR service_guard -I"
  start_bg "kube-proxy-$name" nsenter --net="/run/netns/$ns" env PATH="$ENV_DIR/kube-proxy-bin" "$(command -v kube-proxy)" \
    --kubeconfig="$ENV_DIR/kube-proxy-node.kubeconfig" --hostname-override="$name" \
    --cluster-cidr=$POD_CIDR --proxy-mode=iptables --iptables-min-sync-period=3s --conntrack-max-per-core=0 \
    --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256
  wait_for "node $name Ready" 120 node_ready "$name" || { tail -n 30 "$ENV_DIR/logs/kubelet-$name.stdout" >&2; return 1; }
  start_node_netpol "$k"
}

# start_node_netpol K: kube-router's firewall for node K's pods, in its namespace, and the
# refusal of untranslated Service traffic there (refuse_untranslated).
start_node_netpol() {
  local k=$1 name ns
  name=$(node_name "$k") ns=$(node_netns "$k")
  in_node "$k" bash -c "$(declare -f refuse_untranslated); SERVICE_CIDR=$SERVICE_CIDR REFUSE_AT=$(node_bridge_ip "$k"):9 refuse_untranslated -A"
  start_bg "kube-router-$name" nsenter --net="/run/netns/$ns" env PATH="$ENV_DIR/kube-router-bin" "$SUNK_BIN/kube-router" \
    --kubeconfig="$ENV_DIR/kube-router-node.kubeconfig" --hostname-override="$name" \
    --run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
    --enable-ipv4=true --enable-ipv6=false --service-cluster-ip-range=$SERVICE_CIDR \
    --health-port=0 --metrics-port=0
  wait_for "kube-router's firewall chains on $name" 60 in_node "$k" iptables -S KUBE-ROUTER-FORWARD ||
    { tail -n 30 "$ENV_DIR/logs/kube-router-$name.stdout" >&2; return 1; }
}

# start_nodes: nodes 2..$KUBE_NODES, one after the other (kubelet's start is CPU-bound here).
start_nodes() {
  local k
  [ "$KUBE_NODES" -gt 1 ] || return 0
  # The node daemons in a namespace reach the apiserver at the host's address.
  [ -f "$ENV_DIR/kube-proxy-node.kubeconfig" ] || client_kubeconfig kube-proxy "https://$NODE_IP:6443" kube-proxy-node
  [ -f "$ENV_DIR/kube-router-node.kubeconfig" ] || client_kubeconfig kube-router "https://$NODE_IP:6443" kube-router-node
  pod_egress -A
  for k in $(seq 2 "$KUBE_NODES"); do
    node_running "$k" && continue
    log "starting node $(node_name "$k") ($(node_ip "$k"))"
    start_node "$k"
  done
}

node_running() { [ -f "$ENV_DIR/pids/kubelet-$(node_name "$1")" ] && kill -0 "$(cat "$ENV_DIR/pids/kubelet-$(node_name "$1")")" 2>/dev/null; }

# pod_egress -A|-D: pods leave the cluster's pod network masqueraded as the host, as the bridge
# plugin's ipMasq did when there was one node; between pods (any node) they keep their address,
# which NetworkPolicies match.
pod_egress() {
  local rule=(POSTROUTING -s $POD_CIDR ! -d $POD_CIDR -m comment --comment "sunk: pod egress" -j MASQUERADE)
  if [ "$1" = -D ]; then
    while iptables -t nat -D "${rule[@]}" 2>/dev/null; do :; done
  else
    iptables -t nat -C "${rule[@]}" 2>/dev/null || iptables -t nat -A "${rule[@]}"
  fi
}

# node_fail NAME: a power cut. The node's link goes down first, so that nothing it still sends
# arrives, then every process of it dies at once: its containers (its cgroup root), their shims,
# kubelet, containerd, kube-proxy and kube-router.
node_fail() {
  local k name dir d
  k=$(node_index "$1"); [ "$k" != 1 ] || die "sunk-node runs the control plane: fail an extra node"
  name=$(node_name "$k") dir=$(node_dir "$k")
  ip link set "$(node_veth "$k")" down
  for d in kubelet kube-proxy kube-router containerd; do
    [ -f "$ENV_DIR/pids/$d-$name" ] && kill -KILL -- "-$(cat "$ENV_DIR/pids/$d-$name")" 2>/dev/null || true
    rm -f "$ENV_DIR/pids/$d-$name"
  done
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $dir/containerd/containerd.sock" || true
  kill_cgroup_tree "$name"
  log "node $name failed (link down, every process killed)"
}

# node_restore NAME: the failed node boots again.
node_restore() {
  local k; k=$(node_index "$1")
  if node_running "$k"; then log "node $1 is up"; return 0; fi
  start_node "$k"
  log "node $(node_name "$k") restored"
}

# kill_cgroup_tree ROOT: KILL every process in the cgroup ROOT of every hierarchy, twice (a
# process may fork while the first pass runs).
kill_cgroup_tree() {
  local pass
  for pass in 1 2; do
    find /sys/fs/cgroup/*/"$1" /sys/fs/cgroup/"$1" -name cgroup.procs 2>/dev/null | xargs -r cat 2>/dev/null | sort -u | xargs -r kill -KILL 2>/dev/null || true
  done
}

# down_nodes: what down_quiet removes for the extra nodes (after every daemon stopped).
down_nodes() {
  local k ns sock t
  for sock in "$ENV_DIR"/nodes/*/containerd/containerd.sock; do
    [ -S "$sock" ] || continue
    for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
  done
  for ns in $(ip netns list 2>/dev/null | awk '/^sunk-kn[0-9]+/{print $1}'); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL
    ip netns del "$ns" 2>/dev/null || true
  done
  for t in $(ip -o link show master "$NODES_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 || true); do
    ip link del "$t" 2>/dev/null || true
  done
  ip link del "$NODES_BRIDGE" 2>/dev/null || true
  pod_egress -D
  for t in /sys/fs/cgroup/*/sunk-node-* /sys/fs/cgroup/sunk-node-*; do
    [ -d "$t" ] && { kill_cgroup_tree "$(basename "$t")"; find "$t" -depth -type d -exec rmdir {} \; 2>/dev/null; }
  done
  return 0
}
