#!/usr/bin/env bash
# env-slurm.sh up|down|status|exec CMD...|restart-node NAME|stop-restd|start-restd: a standalone
# real Slurm for integration tests, of release $SUNK_SLURM_VERSION (24.11, the default, or 26.05).
#
#                24.11                           26.05
#   slurmctld   10.77.0.1:6817, bridge sunk-slurm0   10.77.1.1:6827, bridge sunk-slurm26 (host network, configless, JWT)
#   slurmrestd  127.0.0.1:6820                    127.0.0.1:6821 (rest_auth/jwt; $SUNK_SLURMRESTD_PORT overrides)
#   slurmd      $SUNK_SLURM_NODES dynamic nodes (slurmd -Z), each in its own network namespace
#   state       $SUNK_STATE/slurm                 $SUNK_STATE/slurm-26.05
#
# Both releases run at once: each has its own root filesystem, state, bridge, subnet, ports, network
# namespaces and lock (hack/lib.sh), and `down` of one leaves the other alone. Every daemon runs in
# the cached root filesystem under a private mount namespace, so `down` has only processes, network
# namespaces and the bridge to remove. Tests read env.json in the state directory for the REST URL,
# the JWT key, the node names and the release.
source "$(dirname "$0")/lib.sh"
ENV_DIR=$SLURM_STATE
NODES=${SUNK_SLURM_NODES:-3}
REST_PORT=${SUNK_SLURMRESTD_PORT:-$SLURM_REST_PORT}
BRIDGE=$SLURM_BRIDGE
NET=$SLURM_NET
CTLD_PORT=$SLURM_CTLD_PORT
LOCK=slurm-env$SLURM_SUFFIX
CHROOT=$SUNK_ROOT/hack/slurm-chroot.sh

node_name() { echo "slurm-n$1"; }

write_config() {
  mkdir -p "$ENV_DIR"/{etc,etc-node,logs,shared,spool/ctld,spool/restd}
  chmod 1777 "$ENV_DIR/shared"
  head -c 1024 /dev/urandom > "$ENV_DIR/etc/slurm.key"
  head -c 32 /dev/urandom > "$ENV_DIR/etc/jwt.key"
  chmod 600 "$ENV_DIR/etc/slurm.key" "$ENV_DIR/etc/jwt.key"
  # slurmd learns its configuration from slurmctld (configless): its /etc/slurm holds only the key.
  cp -p "$ENV_DIR/etc/slurm.key" "$ENV_DIR/etc-node/slurm.key"
  printf '127.0.0.1 localhost\n%s.1 slurmctld\n' "$NET" > "$ENV_DIR/hosts"
  for i in $(seq "$NODES"); do printf '%s.%d %s\n' "$NET" $((10 + i)) "$(node_name "$i")" >> "$ENV_DIR/hosts"; done
  slurm_conf > "$ENV_DIR/etc/slurm.conf"
  printf 'CgroupPlugin=autodetect\n' > "$ENV_DIR/etc/cgroup.conf"
}

# slurm_conf prints the test bed's slurm.conf. Preemption (partition_prio, CANCEL) lets the
# scheduler tests preempt: a job in partition "urgent" (a higher PriorityTier over the same
# nodes) cancels jobs of "all"; jobs that all stay in "all" never preempt each other. Jobs of
# partition "requeue" (PreemptMode=REQUEUE, which a partition may set over the cluster's) go
# back to the queue instead. Partition "bench" oversubscribes (up to 100 jobs per CPU) so that
# the scheduler benchmark can hold many small placeholder jobs at once on three 2-CPU nodes.
slurm_conf() {
  cat <<CONF
ClusterName=sunk-test
SlurmctldHost=slurmctld($NET.1)
SlurmUser=root
AuthType=auth/slurm
CredType=cred/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
SlurmctldParameters=enable_configless
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# As sunk renders it: a GPU request is valid GRES, refused only for want of a node with GPUs.
GresTypes=gpu
MaxNodeCount=6000
# The production defaults sunk renders (internal/render/config.go productionDefaults; a unit
# test there keeps these lines equal), so that tests meet the scheduling latency and node
# update cadence of a real sunk cluster.
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000,sched_interval=10,bf_continue,bf_interval=10,bf_max_job_test=1000,max_rpc_cnt=150,ignore_constraint_validation
SlurmdTimeout=300
ReturnToService=2
MinJobAge=120
MessageTimeout=10
BatchStartTimeout=60
TCPTimeout=5
KillWait=30
UnkillableStepTimeout=180
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10
PartitionName=requeue Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
PartitionName=bench Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=1 OverSubscribe=FORCE:100
CONF
  # slurmctld runs on the host network: a second test bed needs a port of its own.
  [ "$CTLD_PORT" = 6817 ] || echo "SlurmctldPort=$CTLD_PORT"
}

# refresh_config brings a running test bed's slurm.conf up to date with slurm_conf (a test bed
# started by an older version of this script) by reconfigure, without restarting anything.
refresh_config() {
  local want
  want=$(slurm_conf)
  [ "$want" = "$(cat "$ENV_DIR/etc/slurm.conf")" ] && return 0
  log "slurm.conf changed: reconfigure"
  printf '%s\n' "$want" > "$ENV_DIR/etc/slurm.conf"
  exec_in scontrol reconfigure
  wait_for "slurmrestd after reconfigure" 60 rest_ok
}

network() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || {
    ip link add "$BRIDGE" type bridge
    ip addr add "$NET.1/24" dev "$BRIDGE"
  }
  ip link set "$BRIDGE" up
  local i ns
  for i in $(seq "$NODES"); do
    ns=$SLURM_NETNS$i
    ip netns add "$ns"
    ip link add "$SLURM_VETH$i" type veth peer name eth0 netns "$ns"
    ip link set "$SLURM_VETH$i" master "$BRIDGE" up
    ip -n "$ns" addr add "$NET.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" route add default via "$NET.1"
  done
}

# in_chroot HOSTNAME ETC SPOOL CMD...: the command line that runs CMD in the Slurm root filesystem.
in_chroot() { echo unshare --mount --uts --propagation private "$CHROOT" "$ENV_DIR" "$@"; }

# rest_ok: slurmrestd answers an authenticated ping (a token minted by scontrol, as a user would),
# in v0.0.42, the data parser both releases serve.
rest_ok() {
  local token
  token=$(exec_in scontrol token username=root lifespan=60 2>/dev/null | sed -n 's/^SLURM_JWT=//p')
  [ -n "$token" ] && curl -sf -o /dev/null -H "X-SLURM-USER-NAME: root" -H "X-SLURM-USER-TOKEN: $token" \
    "http://127.0.0.1:$REST_PORT/slurm/v0.0.42/ping"
}
nodes_idle() {
  local idle
  idle=$(exec_in scontrol -o show nodes 2>/dev/null | grep -c 'State=IDLE' || true)
  [ "$idle" -ge "$NODES" ]
}

start_restd() {
  start_bg slurmrestd env SLURM_JWT=daemon $(in_chroot slurmctld "$ENV_DIR/etc" "$ENV_DIR/spool/restd") \
    slurmrestd -u slurmrestd -g slurmrestd -a rest_auth/jwt -s openapi/slurmctld "127.0.0.1:$REST_PORT"
}

# start_slurmd I: node I's slurmd, a dynamic node that registers itself (again) at start.
start_slurmd() {
  mkdir -p "$ENV_DIR/spool/n$1/slurmd"
  start_bg "slurmd-n$1" nsenter --net="/run/netns/$SLURM_NETNS$1" $(in_chroot "$(node_name "$1")" "$ENV_DIR/etc-node" "$ENV_DIR/spool/n$1") \
    slurmd -D -Z -N "$(node_name "$1")" --conf-server "$NET.1:$CTLD_PORT" --conf "CPUs=2 RealMemory=1024 Features=sunk-test"
}

# restart_node NAME: restart a node's slurmd, which registers the node again when its record
# was removed (tests of record removal put the test bed back this way).
restart_node() {
  local i=${1#slurm-n}
  [ -f "$ENV_DIR/pids/slurmd-n$i" ] || die "no node $1"
  stop_bg "slurmd-n$i"
  start_slurmd "$i"
  wait_for "$1 to register" 60 node_up "$1"
}

# node_up NAME: the node is registered, idle and responding.
node_up() {
  local out
  out=$(exec_in scontrol -o show node "$1" 2>&1) || return 1
  case $out in *State=IDLE*NOT_RESPONDING*|*State=IDLE*DOWN*) return 1 ;; *State=IDLE*) return 0 ;; esac
  return 1
}

exec_in() { $(in_chroot slurmctld "$ENV_DIR/etc" "$ENV_DIR/spool/restd") "$@"; }

up() {
  if [ -f "$ENV_DIR/env.json" ] && rest_ok; then refresh_config; log "slurm environment already up"; return 0; fi
  "$SUNK_ROOT/hack/provision.sh" host rootfs
  down_quiet
  log "starting Slurm: slurmctld, slurmrestd and $NODES dynamic slurmd nodes"
  write_config
  network
  start_bg slurmctld $(in_chroot slurmctld "$ENV_DIR/etc" "$ENV_DIR/spool/ctld") slurmctld -D -i
  wait_for "slurmctld" 60 exec_in scontrol ping || { tail -n 20 "$ENV_DIR"/logs/slurmctld.* >&2; return 1; }
  start_restd
  local i
  for i in $(seq "$NODES"); do start_slurmd "$i"; done
  wait_for "slurmrestd" 60 rest_ok || { cat "$ENV_DIR/logs/slurmrestd.stdout" >&2; return 1; }
  wait_for "$NODES idle nodes" 90 nodes_idle || { exec_in scontrol show nodes >&2; tail -n 20 "$ENV_DIR"/logs/slurmd-* >&2; return 1; }
  local names
  names=$(for i in $(seq "$NODES"); do printf '"%s",' "$(node_name "$i")"; done)
  cat > "$ENV_DIR/env.json" <<JSON
{"restURL": "http://127.0.0.1:$REST_PORT", "jwtKeyFile": "$ENV_DIR/etc/jwt.key", "user": "root",
 "nodes": [${names%,}], "sharedDir": "$ENV_DIR/shared", "clusterName": "sunk-test",
 "slurmVersion": "$(exec_in sinfo --version | awk '{print $NF}')",
 "execCommand": ["env", "SUNK_SLURM_VERSION=$SUNK_SLURM_VERSION", "$SUNK_ROOT/hack/env-slurm.sh", "exec"]}
JSON
  log "slurm environment up: REST http://127.0.0.1:$REST_PORT ($ENV_DIR/env.json)"
}

down_quiet() {
  local f
  stop_all_bg
  for f in $(ip netns list 2>/dev/null | awk -v p="$SLURM_NETNS" 'index($1, p) == 1 {print $1}'); do
    ip netns pids "$f" 2>/dev/null | xargs -r kill -KILL
    ip netns del "$f"
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  release_netns_dir
  rm -rf "$ENV_DIR"
}

down() { down_quiet; log "slurm environment down"; }

status() {
  [ -f "$ENV_DIR/env.json" ] && rest_ok || { echo "slurm environment: down"; return 1; }
  echo "slurm environment: up"; exec_in sinfo -N
}

case ${1:-} in
  up) with_lock "$LOCK" up || { log "slurm environment failed to start; logs were in $ENV_DIR/logs"; with_lock "$LOCK" down_quiet; exit 1; } ;;
  down) with_lock "$LOCK" down ;;
  status) status || exit 1 ;;  # down is an answer, not an error (no ERR trap)
  exec) shift; exec_in "$@" ;;
  restart-node) restart_node "${2:?usage: $0 restart-node slurm-nI}" ;;
  # For fail-closed tests: slurmrestd goes away (the REST client sees connection refused)
  # and comes back; slurmctld and the nodes keep running.
  stop-restd) stop_bg slurmrestd ;;
  start-restd) [ -f "$ENV_DIR/env.json" ] || die "slurm environment is down"; start_restd; wait_for "slurmrestd" 60 rest_ok ;;
  *) die "usage: $0 up|down|status|exec CMD..." ;;
esac
