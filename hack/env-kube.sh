#!/usr/bin/env bash
# env-kube.sh up api|cluster | down | status | kwok N | images | netpol | nodes | node-fail NODE | node-restore NODE:
# a real Kubernetes v1.33.13 on this machine.
#
#   api      etcd + kube-apiserver (https://127.0.0.1:6443); envtest can also use the binaries
#            directly through KUBEBUILDER_ASSETS=$SUNK_CACHE/envtest
#   cluster  api + kube-controller-manager + kube-scheduler + the real node "sunk-node"
#            (containerd/runc, CNI bridge sunk0 on 10.88.0.0/17, kube-proxy in iptables mode, IPv4)
#            + SUNK_KUBE_NODES-1 (default 2) more real nodes sunk-node-2, ..., each in a network
#            namespace of its own with its own containerd, kubelet, kube-proxy and kube-router,
#            tainted so that only pods asking for several machines go there (hack/kube-nodes.sh).
#            NetworkPolicies are enforced (kube-router's firewall alone, iptables and ipset).
#            SUNK_KWOK_NODES=N adds N kwok fake nodes (label type=kwok) for scale tests.
#            Add-ons (hack/manifests): CoreDNS as kube-dns at 10.96.0.10 (cluster.local) and the
#            default StorageClass "standard" (kube-controller-manager's hostPath provisioner).
#
# `images` (and `up cluster` on a running cluster) pushes the images of $SUNK_IMAGES that changed
# to the test bed's registry and has every node pull them (hack/registry.sh). `netpol` (and `up
# cluster` on a running cluster) starts the NetworkPolicy enforcement on a cluster started
# without it; `nodes` the extra nodes missing. `node-fail NODE` cuts an extra node's power (link
# down, every process of it killed) and `node-restore NODE` boots it again. Admin kubeconfig:
# $SUNK_STATE/kube/admin.kubeconfig. `down` removes processes, mounts, iptables chains, ipsets,
# ip rules, cgroups, the bridge and the state directory.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/kube-nodes.sh"
source "$(dirname "$0")/registry.sh"
ENV_DIR=$SUNK_STATE/kube
P=$ENV_DIR/pki
NODE=sunk-node
NODE_IP=${SUNK_NODE_IP:-$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
[ -n "$NODE_IP" ] || NODE_IP=$(hostname -I | awk '{print $1}')
SERVICE_CIDR=10.96.0.0/16
POD_CIDR=10.88.0.0/16
export KUBECONFIG=$ENV_DIR/admin.kubeconfig
CTR="ctr -a $ENV_DIR/containerd/containerd.sock -n k8s.io"
# The upstream resolvers pods with dnsPolicy Default (CoreDNS) get; never systemd-resolved's stub.
HOST_RESOLV=/etc/resolv.conf
[ -f /run/systemd/resolve/resolv.conf ] && HOST_RESOLV=/run/systemd/resolve/resolv.conf
CLUSTER_DNS=10.96.0.10

# issue NAME SUBJECT EXTENSIONS: a certificate of the test bed's CA, in $P (the working directory).
issue() {
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

# client_kubeconfig USER [SERVER [NAME]]: $ENV_DIR/NAME.kubeconfig (NAME defaults to USER) with the
# client certificate $P/USER.crt, for the apiserver at SERVER (https://127.0.0.1:6443).
client_kubeconfig() {
  local kc=$ENV_DIR/${3:-$1}.kubeconfig
  cat > "$kc" <<KC
apiVersion: v1
kind: Config
clusters: [{name: sunk, cluster: {server: "${2:-https://127.0.0.1:6443}", certificate-authority: "$P/ca.crt"}}]
users: [{name: $1, user: {client-certificate: "$P/$1.crt", client-key: "$P/$1.key"}}]
contexts: [{name: sunk, context: {cluster: sunk, user: $1}}]
current-context: sunk
KC
  chmod 600 "$kc"
}

certs() {
  mkdir -p "$P" && cd "$P"
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=sunk-testbed-ca" 2>/dev/null
  issue apiserver /CN=kube-apiserver "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,IP:$NODE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth"
  # The front proxy's CA (kubeadm's layout): with it the apiserver publishes the requestheader
  # settings in kube-system/extension-apiserver-authentication, which kube-scheduler,
  # kube-controller-manager and sunk-scheduler read (without them each logged "missing content
  # for CA bundle" over and over).
  openssl req -x509 -newkey rsa:2048 -nodes -keyout front-proxy-ca.key -out front-proxy-ca.crt -days 3650 -subj "/CN=sunk-testbed-front-proxy-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out front-proxy-client.csr -subj /CN=front-proxy-client 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' > front-proxy-client.ext
  openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key -CAcreateserial \
    -out front-proxy-client.crt -days 3650 -extfile front-proxy-client.ext 2>/dev/null
  rm -f front-proxy-client.csr front-proxy-client.ext
  issue admin "/O=system:masters/CN=sunk-admin" extendedKeyUsage=clientAuth
  issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" extendedKeyUsage=clientAuth
  issue controller-manager /CN=system:kube-controller-manager extendedKeyUsage=clientAuth
  issue scheduler /CN=system:kube-scheduler extendedKeyUsage=clientAuth
  issue kube-proxy /CN=system:kube-proxy extendedKeyUsage=clientAuth
  issue kube-router /CN=system:kube-router extendedKeyUsage=clientAuth
  issue kubelet "/O=system:nodes/CN=system:node:$NODE" extendedKeyUsage=clientAuth
  issue kubelet-serving "/CN=$NODE" "subjectAltName=IP:127.0.0.1,IP:$NODE_IP,DNS:localhost,DNS:$NODE
extendedKeyUsage=serverAuth"
  local u
  for u in admin controller-manager scheduler kube-proxy kube-router kubelet; do client_kubeconfig $u; done
  chmod 600 "$P"/*.key
  cd - >/dev/null
}

apiserver_ready() { [ "$(kubectl get --raw /readyz 2>/dev/null)" = ok ]; }

start_api() {
  certs
  start_bg etcd etcd --name sunk --data-dir "$ENV_DIR/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster sunk=http://127.0.0.1:2380
  wait_for etcd 30 sh -c 'curl -s http://127.0.0.1:2379/health | grep -q true'
  # Bound to every address so that pods reach it through the kubernetes Service at $NODE_IP.
  start_bg kube-apiserver kube-apiserver --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --advertise-address="$NODE_IP" --secure-port=6443 \
    --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" --client-ca-file="$P/ca.crt" \
    --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local --service-cluster-ip-range=$SERVICE_CIDR \
    --authorization-mode=Node,RBAC --allow-privileged=true --kubelet-preferred-address-types=InternalIP \
    --kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$P/ca.crt" --cert-dir="$ENV_DIR/apiserver-certs" \
    --requestheader-client-ca-file="$P/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$P/front-proxy-client.crt" --proxy-client-key-file="$P/front-proxy-client.key" \
    --enable-priority-and-fairness=false
  wait_for kube-apiserver 120 apiserver_ready || { tail -n 30 "$ENV_DIR/logs/kube-apiserver.stdout" >&2; return 1; }
  echo api > "$ENV_DIR/mode"
}

# configs DIR NODE SUBNET SERVING CGROUP_ROOT: the configurations of a node's containerd, CNI and
# kubelet in DIR: its pods in SUBNET on the bridge sunk0 (of the node's network namespace), its
# serving certificate SERVING.crt and .key, its pods' cgroups under /CGROUP_ROOT.
configs() {
  local dir=$1 node=$2 subnet=$3 serving=$4 cgroup_root=$5
  mkdir -p "$dir"/{containerd,cni/net.d,kubelet}
  containerd config default | sed \
    -e "s#^root = .*#root = \"$dir/containerd/root\"#" -e "s#^state = .*#state = \"$dir/containerd/state\"#" \
    -e "s#address = \"/run/containerd/containerd.sock\"#address = \"$dir/containerd/containerd.sock\"#" \
    -e 's#sandbox_image = .*#sandbox_image = "registry.k8s.io/pause:3.10"#' \
    -e 's#bin_dir = "/opt/cni/bin"#bin_dir = "/usr/lib/cni"#' -e "s#conf_dir = \"/etc/cni/net.d\"#conf_dir = \"$dir/cni/net.d\"#" \
    -e 's#restrict_oom_score_adj = false#restrict_oom_score_adj = true#' \
    -e "s#config_path = \"\"#config_path = \"$ENV_DIR/certs.d\"#" > "$dir/containerd/config.toml"
  # restrict_oom_score_adj: this machine lacks CAP_SYS_RESOURCE, so runc cannot lower a sandbox's
  # oom_score_adj ("can't get final child's PID from pipe: EOF") unless containerd clamps it.
  # ipMasq off: pods keep their address to pods of every node (pod_egress masquerades the rest).
  cat > "$dir/cni/net.d/10-sunk-bridge.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "sunk", "plugins": [
  {"type": "bridge", "bridge": "sunk0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam", "ranges": [[{"subnet": "$subnet"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
  cat > "$dir/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_root
failCgroupV1: false
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
podLogsDir: $dir/pod-logs
authentication: {anonymous: {enabled: false}, webhook: {enabled: true}, x509: {clientCAFile: $P/ca.crt}}
authorization: {mode: Webhook}
tlsCertFile: $serving.crt
tlsPrivateKeyFile: $serving.key
clusterDNS: ["$CLUSTER_DNS"]
clusterDomain: cluster.local
resolvConf: $HOST_RESOLV
failSwapOn: false
imageGCHighThresholdPercent: 100
evictionHard: {}
maxPods: 110
YAML
}

# cgroups ROOT: kubelet's cgroupRoot must exist in every hierarchy; cpuset needs its CPUs and memory
# nodes set.
cgroups() {
  local h
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [ -d "$h" ] && [ -w "$h" ] || continue
    case $h in /sys/fs/cgroup/unified/|/sys/fs/cgroup/) [ "$(stat -fc %T "$h")" = cgroup2fs ] || continue ;; esac
    mkdir -p "$h/$1"
  done
  if [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then
    cat /sys/fs/cgroup/cpuset/cpuset.cpus > "/sys/fs/cgroup/cpuset/$1/cpuset.cpus"
    cat /sys/fs/cgroup/cpuset/cpuset.mems > "/sys/fs/cgroup/cpuset/$1/cpuset.mems"
  fi
}

node_ready() {
  kubectl get node "${1:-$NODE}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True
}

start_cluster() {
  hostpath_pv_dir
  start_bg kube-controller-manager kube-controller-manager --kubeconfig="$ENV_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$ENV_DIR/controller-manager.kubeconfig" --authorization-kubeconfig="$ENV_DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
    --use-service-account-credentials=true --leader-elect=false --controllers='*,-nodeipam' --service-cluster-ip-range=$SERVICE_CIDR \
    --enable-hostpath-provisioner=true
  start_bg kube-scheduler kube-scheduler --kubeconfig="$ENV_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$ENV_DIR/scheduler.kubeconfig" --authorization-kubeconfig="$ENV_DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false
  apply_addons
  configs "$ENV_DIR" $NODE $FIRST_NODE_POD_CIDR "$P/kubelet-serving" sunk
  cgroups sunk
  claim_netns_dir
  pod_egress -A
  start_registry
  push_images
  start_bg containerd containerd --config "$ENV_DIR/containerd/config.toml"
  wait_for containerd 30 $CTR version
  pull_images 1
  start_bg kubelet kubelet --config="$ENV_DIR/kubelet/config.yaml" --kubeconfig="$ENV_DIR/kubelet.kubeconfig" \
    --root-dir="$ENV_DIR/kubelet/root" --hostname-override=$NODE --node-ip="$NODE_IP" --node-labels="$(node_labels 1)"
  service_guard -I
  # kube-proxy runs dual-stack whenever ip6tables works, and this cluster is IPv4 only: its PATH
  # has iptables alone, so it proxies one family. Measured in an e2e run (2026-11-29, 444 s of
  # kube-proxy): 580 syncs, 254 of them IPv6 ones with nothing to proxy, and kube-proxy with its
  # iptables children 21 % of the machine's CPU. --iptables-min-sync-period 3s (default 1s) lets
  # one sync carry the endpoint changes of a few seconds of pod churn.
  mkdir -p "$ENV_DIR/kube-proxy-bin"
  local b
  for b in iptables iptables-save iptables-restore; do ln -sf "$(command -v "$b")" "$ENV_DIR/kube-proxy-bin/$b"; done
  start_bg kube-proxy env PATH="$ENV_DIR/kube-proxy-bin" "$(command -v kube-proxy)" \
    --kubeconfig="$ENV_DIR/kube-proxy.kubeconfig" --hostname-override=$NODE \
    --cluster-cidr=$POD_CIDR --proxy-mode=iptables --iptables-min-sync-period=3s --conntrack-max-per-core=0 \
    --metrics-bind-address=127.0.0.1:10249 --healthz-bind-address=127.0.0.1:10256
  wait_for "node $NODE Ready" 120 node_ready || { tail -n 30 "$ENV_DIR/logs/kubelet.stdout" >&2; return 1; }
  # After the node exists: kube-router reads its address from the Node and exits without one.
  start_netpol
  start_nodes
  wait_for "default service account" 60 kubectl get serviceaccount default
  wait_for "CoreDNS Ready" 120 coredns_ready || { kubectl -n kube-system describe pods -l k8s-app=kube-dns | tail -n 30 >&2; return 1; }
  wait_for "cluster DNS at $CLUSTER_DNS" 60 busybox nslookup kubernetes.default.svc.cluster.local "$CLUSTER_DNS"
  if [ "${SUNK_KWOK_NODES:-0}" -gt 0 ]; then start_kwok "$SUNK_KWOK_NODES"; fi
  echo cluster > "$ENV_DIR/mode"
}

# start_netpol: enforce NetworkPolicies, which the bridge CNI does not: kube-router's network
# policy controller alone (no routing, no service proxy), with iptables and ipset, so that every
# e2e test runs under the policies sunk renders. Bridged pod-to-pod traffic passes iptables'
# FORWARD chain only with br_netfilter's bridge-nf-call-iptables, which is checked. kube-router
# admits what a pod's own node sends it (kubelet's probes, the e2e tests' in-process operator):
# its KUBE-POD-FW chains accept sources of address type LOCAL first. A cluster started before
# this existed gets the certificate and its kubeconfig here (`netpol`).
start_netpol() {
  [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ] ||
    die "bridge-nf-call-iptables is not 1 (modprobe br_netfilter; sysctl net.bridge.bridge-nf-call-iptables=1): bridged pod traffic would bypass every NetworkPolicy"
  if [ ! -f "$P/kube-router.crt" ]; then
    (cd "$P" && issue kube-router /CN=system:kube-router extendedKeyUsage=clientAuth && chmod 600 kube-router.key)
    client_kubeconfig kube-router
  fi
  kubectl apply -f "$SUNK_ROOT/hack/manifests/kube-router.yaml" >/dev/null
  refuse_untranslated -A
  if [ -f "$ENV_DIR/pids/kube-router" ] && kill -0 "$(cat "$ENV_DIR/pids/kube-router")" 2>/dev/null; then return 0; fi
  # Its own PATH, like kube-proxy's: the IPv4 tools only, and ipset.
  mkdir -p "$ENV_DIR/kube-router-bin"
  local b
  for b in iptables iptables-save iptables-restore ipset; do ln -sf "$(command -v "$b")" "$ENV_DIR/kube-router-bin/$b"; done
  start_bg kube-router env PATH="$ENV_DIR/kube-router-bin" "$SUNK_BIN/kube-router" \
    --kubeconfig="$ENV_DIR/kube-router.kubeconfig" --hostname-override=$NODE \
    --run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
    --enable-ipv4=true --enable-ipv6=false --service-cluster-ip-range=$SERVICE_CIDR \
    --health-port=0 --metrics-port=0
  wait_for "kube-router's firewall chains" 60 iptables -S KUBE-ROUTER-FORWARD ||
    { tail -n 30 "$ENV_DIR/logs/kube-router.stdout" >&2; return 1; }
}

# refuse_untranslated -A|-D: a pod's TCP packet to a Service cluster IP that kube-proxy has not
# translated (no endpoints, or not yet) is refused with a reset, as kube-proxy's REJECT and
# service_guard refuse it without kube-router. kube-router's FORWARD chain, which it keeps first,
# accepts every packet of a pod that its policies admit, so neither of those sees pods' packets
# any more: a client of a Service whose pod is gone (a lost primary slurmctld's) waited for its
# timeout instead of moving on. A nat rule after kube-proxy's in PREROUTING sees only what
# kube-proxy did not DNAT, and sends it to a port of the bridge's own address where nothing
# listens: the node's TCP stack answers with a reset, which no ICMP rate limit holds back (an ip
# rule "prohibit" answered the first connect of a pod at once, then one per second or two, and
# slurmrestd retrying a lost controller used them all). Only packets from the bridge match.
REFUSE_AT=${FIRST_NODE_POD_CIDR%.0/17}.1:9   # the bridge's address (the CNI gateway); nothing listens on 9
refuse_untranslated() {
  local rule=(PREROUTING -i sunk0 -d $SERVICE_CIDR -p tcp -m comment --comment "sunk: untranslated Service IP" -j DNAT --to-destination $REFUSE_AT)
  if [ "$1" = -D ]; then
    while iptables -t nat -D "${rule[@]}" 2>/dev/null; do :; done
  else
    iptables -t nat -C "${rule[@]}" 2>/dev/null || iptables -t nat -A "${rule[@]}"
  fi
}

# clean_netpol: kube-router's iptables chains go with the KUBE- ones (clean_iptables); its ipsets
# here, once nothing refers to them.
clean_netpol() {
  local s
  refuse_untranslated -D
  command -v ipset >/dev/null || return 0
  for s in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?(KUBE-|kube-router)' || true); do
    ipset destroy "$s" 2>/dev/null || true
  done
}

# images_to_nodes: the images that changed pushed to the registry and pulled by every running node.
images_to_nodes() {
  local k
  start_registry
  push_images
  pull_images 1
  for k in $(seq 2 "$KUBE_NODES"); do node_running "$k" && pull_images "$k"; done
  return 0
}

# service_guard -I|-D: TCP to a Service cluster IP that kube-proxy has not (yet) translated is
# reset, as it fails in any cluster, instead of leaving by the default route. On a host whose
# gateway answers any HTTP request (a transparent proxy's 404), a client's kept-alive connection
# made in the second before kube-proxy's rule existed stayed stuck to that answer for good.
# Filter rules see packets after kube-proxy's DNAT, so translated traffic never matches.
service_guard() {
  local chain
  for chain in FORWARD OUTPUT; do
    if [ "$1" = -D ]; then
      while iptables -D $chain -d $SERVICE_CIDR -p tcp -j REJECT --reject-with tcp-reset 2>/dev/null; do :; done
    else
      iptables -C $chain -d $SERVICE_CIDR -p tcp -j REJECT --reject-with tcp-reset 2>/dev/null ||
        iptables -I $chain -d $SERVICE_CIDR -p tcp -j REJECT --reject-with tcp-reset
    fi
  done
}

# The hostPath provisioner puts each volume in $HOSTPATH_PV/<uuid>; a symlink keeps the data in
# the state directory, which `down` removes along with the link.
hostpath_pv_dir() {
  mkdir -p "$ENV_DIR/hostpath-pv"
  rm -rf "$HOSTPATH_PV"
  ln -s "$ENV_DIR/hostpath-pv" "$HOSTPATH_PV"
}

# apply_addons: the manifests of hack/manifests. CoreDNS forwards other names to the host's
# resolvers when it has one it can reach from a pod; offline (none, or only a loopback stub),
# forward goes (the plugin refuses an empty upstream list), and loop with it.
apply_addons() {
  local m=$SUNK_ROOT/hack/manifests
  if awk '$1 == "nameserver" && $2 !~ /^(127\.|::1$)/ {ok = 1} END {exit !ok}' "$HOST_RESOLV" 2>/dev/null; then
    cat "$m/coredns.yaml"
  else
    log "no upstream nameserver in $HOST_RESOLV: CoreDNS answers cluster.local only"
    sed -e '/^ *forward \. /d' -e '/^ *loop$/d' "$m/coredns.yaml"
  fi | kubectl apply -f - -f "$m/storageclass.yaml" >/dev/null
}

coredns_ready() {
  [ "$(kubectl -n kube-system get deployment coredns -o jsonpath='{.status.readyReplicas}')" = 1 ]
}

# start_kwok N: kwok manages nodes annotated kwok.x-k8s.io/node=fake; make sure N of them exist.
start_kwok() {
  local want=$1 stages=$ENV_DIR/kwok-stages.yaml src f i
  if ! { [ -f "$ENV_DIR/pids/kwok" ] && kill -0 "$(cat "$ENV_DIR/pids/kwok")" 2>/dev/null; }; then
    src=$(cd "$SUNK_ROOT/hack/tools/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
    : > "$stages"
    for f in "$src"/node/fast/node-initialize.yaml "$src"/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml "$src"/pod/fast/pod-*.yaml; do
      cat "$f" >> "$stages"; echo --- >> "$stages"
    done
    start_bg kwok kwok --kubeconfig="$ENV_DIR/admin.kubeconfig" --config="$stages" --manage-all-nodes=false \
      --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --cidr=10.89.0.0/16 --node-ip=10.89.0.1 \
      --node-lease-duration-seconds=40 --server-address=127.0.0.1:10247
  fi
  for i in $(seq "$want"); do
    cat <<YAML
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$i}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
---
YAML
  done | kubectl apply -f - >/dev/null
  wait_for "$want kwok nodes Ready" 120 kwok_ready "$want"
}

kwok_ready() {
  [ "$(kubectl get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)" -ge "$1" ]
}

up() {
  local want=$1 have=""
  [ -f "$ENV_DIR/mode" ] && have=$(cat "$ENV_DIR/mode")
  if [ -n "$have" ] && apiserver_ready; then
    if [ "$have" = cluster ]; then images_to_nodes; start_netpol; start_nodes; log "kube environment already up ($have)"; return 0; fi
    if [ "$want" = api ]; then log "kube environment already up ($have)"; return 0; fi
    "$SUNK_ROOT/hack/provision.sh" host tools images workloads
    log "extending the kube environment to a cluster"
    start_cluster
    return
  fi
  "$SUNK_ROOT/hack/provision.sh" host tools
  if [ "$want" = cluster ]; then "$SUNK_ROOT/hack/provision.sh" images workloads; fi
  down_quiet
  mkdir -p "$ENV_DIR"
  log "starting Kubernetes $KUBE_VERSION ($want)"
  start_api
  if [ "$want" = cluster ]; then start_cluster; fi
  log "kube environment up ($want): export KUBECONFIG=$KUBECONFIG"
}

# no_tasks: no node's containerd runs a container (a stopped containerd runs none).
no_tasks() {
  local sock
  for sock in "$ENV_DIR"/containerd/containerd.sock "$ENV_DIR"/nodes/*/containerd/containerd.sock; do
    [ -S "$sock" ] || continue
    [ -z "$(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null)" ] || return 1
  done
}

down_quiet() {
  if [ -f "$ENV_DIR/pids/kube-apiserver" ] && apiserver_ready; then
    # Let kubelet tear pods down properly (CNI DEL, unmounts) before it goes.
    stop_bg kwok; stop_bg kube-controller-manager; stop_bg kube-scheduler
    kubectl delete node -l type=kwok --wait=false >/dev/null 2>&1 || true
    # --wait=false: a pod with a finalizer (a NodeSet member, whose operator may be gone) never goes.
    kubectl delete pods --all -A --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    wait_for "pods to stop on every node" 60 no_tasks || true
  fi
  stop_all_bg 'kubelet*' 'kube-proxy*' 'kube-router*'   # every node's
  if [ -S "$ENV_DIR/containerd/containerd.sock" ]; then
    local t
    for t in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    for t in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks delete -f "$t" >/dev/null 2>&1 || true; done
  fi
  local f
  stop_all_bg
  down_nodes
  [ -x "$SUNK_BIN/kube-proxy" ] && kube-proxy --cleanup >/dev/null 2>&1 || true
  # A pod's veth goes with its network namespace, which the kernel keeps while a socket of it
  # lives on (an orphaned TCP connection retrying): one outlived a run by over 20 minutes and
  # failed the leftovers check. The veths still on the bridge are ours; delete them with it.
  for f in $(ip -o link show master sunk0 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 || true); do
    ip link del "$f" 2>/dev/null || true
  done
  ip link del sunk0 2>/dev/null || true
  service_guard -D
  pod_egress -D
  for f in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do ip netns del "$f" 2>/dev/null || true; done
  release_netns_dir
  # kubelet bind-mounts pod volumes and leaves tmpfs mounts behind when stopped.
  findmnt -rn -o TARGET | { grep "^$ENV_DIR/" || true; } | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" || true; done
  clean_iptables
  clean_netpol
  # Pod cgroups live under /sunk (cgroupRoot) in every v1 hierarchy and in the unified one.
  for f in /sys/fs/cgroup/*/sunk /sys/fs/cgroup/sunk; do
    [ -d "$f" ] && find "$f" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  release_dead_containers
  # Paths that kubelet, containerd and libcni hard-code outside the state directory. A sandbox
  # still up when containerd stops (a failed test's namespace) never gets its CNI DEL, and its
  # loopback result stays behind: the test host's only containerd is this one.
  rm -f /var/lib/kubelet/device-plugins/kubelet.sock /var/lib/cni/results/sunk-* /var/lib/cni/results/cni-loopback-*
  rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet /var/lib/cni/results /var/lib/cni \
    /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd/s /run/containerd 2>/dev/null || true
  rm -rf "$ENV_DIR" "$HOSTPATH_PV"
}

# A container whose shim dies with containerd (a kill that races the task's exit, or a run
# stopped halfway) keeps its runc state under the hard-coded /run/containerd, libcni's result of
# its sandbox's loopback and the shim's socket; nothing deletes them later, so they are deleted
# here: only containers whose bundle lies in this environment, only sockets nobody listens on.
release_dead_containers() {
  local root=/run/containerd/runc/k8s.io id s
  if [ -d "$root" ]; then
    for id in $(runc --root "$root" list -q 2>/dev/null); do
      runc --root "$root" state "$id" 2>/dev/null | grep -q "\"bundle\": \"$ENV_DIR/" || continue
      runc --root "$root" delete --force "$id" >/dev/null 2>&1 || true
      rm -f /var/lib/cni/results/*-"$id"-*
    done
  fi
  for s in /run/containerd/s/*; do
    [ -S "$s" ] || continue
    ss -xlH 2>/dev/null | grep -qF " $s " || rm -f "$s"
  done
}

# kubelet, kube-proxy and kube-router leave KUBE-* chains and the jumps to them behind.
clean_iptables() {
  local ipt t c
  for ipt in iptables ip6tables; do for t in filter nat mangle; do
    $ipt -t $t -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j (KUBE-|CNI-)' | grep -vE '^-A (KUBE-|CNI-)' | sed 's/^-A/-D/' |
      while read -r r; do eval "$ipt -t $t $r" 2>/dev/null || true; done || true
    for c in $($ipt -t $t -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/{print $2}'); do $ipt -t $t -F "$c" 2>/dev/null || true; done
    for c in $($ipt -t $t -S 2>/dev/null | awk '/^-N (KUBE-|CNI-)/{print $2}'); do $ipt -t $t -X "$c" 2>/dev/null || true; done
  done; done
}

down() { down_quiet; log "kube environment down"; }

status() {
  apiserver_ready || { echo "kube environment: down"; return 1; }
  echo "kube environment: up ($(cat "$ENV_DIR/mode")), KUBECONFIG=$KUBECONFIG"
  kubectl get nodes -o wide
}

case ${1:-} in
  up) case ${2:-cluster} in api|cluster) ;; *) die "usage: $0 up api|cluster" ;; esac
      with_lock kube-env up "${2:-cluster}" || { log "kube environment failed to start"; with_lock kube-env down_quiet; exit 1; } ;;
  down) with_lock kube-env down ;;
  status) status || exit 1 ;;  # down is an answer, not an error (no ERR trap)
  kwok) [ -f "$ENV_DIR/mode" ] && [ "$(cat "$ENV_DIR/mode")" = cluster ] || die "kwok nodes need the cluster environment"
        with_lock kube-env start_kwok "${2:?usage: $0 kwok N}" ;;
  netpol) [ -f "$ENV_DIR/mode" ] && [ "$(cat "$ENV_DIR/mode")" = cluster ] || die "NetworkPolicy enforcement needs the cluster environment"
          with_lock kube-env start_netpol ;;
  images) [ -f "$ENV_DIR/mode" ] && [ "$(cat "$ENV_DIR/mode")" = cluster ] || die "pulling images needs the cluster environment"
          with_lock kube-env images_to_nodes ;;
  nodes) [ -f "$ENV_DIR/mode" ] && [ "$(cat "$ENV_DIR/mode")" = cluster ] || die "extra nodes need the cluster environment"
         with_lock kube-env start_nodes ;;
  node-fail) with_lock kube-env node_fail "${2:?usage: $0 node-fail NODE}" ;;
  node-restore) with_lock kube-env node_restore "${2:?usage: $0 node-restore NODE}" ;;
  *) die "usage: $0 up api|cluster | down | status | kwok N | images | netpol | nodes | node-fail NODE | node-restore NODE" ;;
esac
