# Shared settings of the hack/ scripts. Sourced, never run.
# Everything heavy lives in SUNK_CACHE, outside the repository, so that a warm machine is fast
# and a `git clean` never throws away ten minutes of Kubernetes builds.
set -Eeuo pipefail
# A command that fails a script under set -e says which one and where, instead of the script
# ending without a word (-E: also inside functions and subshells).
trap 'printf "\033[31m[sunk] error:\033[0m %s failed (exit %s) at %s:%s\n" "$BASH_COMMAND" "$?" "${BASH_SOURCE[0]##*/}" "$LINENO" >&2' ERR

SUNK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUNK_CACHE=${SUNK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sunk}
SUNK_BIN=$SUNK_CACHE/bin          # kube-*, kubectl, kubelet, helm, kwok, controller-gen, ...
SUNK_STATE=${SUNK_STATE:-$SUNK_CACHE/state}   # running environments; emptied by `down`
SUNK_IMAGES=$SUNK_CACHE/images    # docker-archive tarballs for containerd
KUBE_VERSION=v1.33.13
HOSTPATH_PV=/tmp/hostpath_pv     # hard-wired in kube-controller-manager's hostPath provisioner
export PATH=$SUNK_BIN:/usr/local/go/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
# One set of build flags for every Go build of the project, tools, images and tests alike, so that
# Go's build cache compiles each package once: CGO_ENABLED and -trimpath are part of a compiled
# package's cache key, and the images must be static. -trimpath also keeps a package's cache
# entry the same in every clone (CI's fresh clone reuses a warm machine's compiles); -w (no
# DWARF) makes linking a test binary about 40 % faster. Tests find the checkout from their
# working directory (test/testenv.RepoRoot), not from their own file's path.
export CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -trimpath -ldflags=-w"

# The Slurm release of the test bed (hack/env-slurm.sh) and its root filesystem: 24.11 from Debian
# trixie (the default) or 26.05 from Debian sid. Each release has its own root filesystem, state
# directory, bridge, subnet, controller and REST ports and lock, so that both test beds run at
# once. 24.11 keeps the names it had before there were two (rootfs/slurm, state/slurm,
# sunk-slurm0, 10.77.0.x, 6820). Names of network devices stay within 15 characters.
SUNK_SLURM_VERSION=${SUNK_SLURM_VERSION:-24.11}
case $SUNK_SLURM_VERSION in
  24.11) SLURM_SUITE=trixie SLURM_SUFFIX= SLURM_BRIDGE=sunk-slurm0 SLURM_NET=10.77.0 SLURM_NETNS=sunk-slurm-n
    SLURM_VETH=sunk-sn SLURM_CTLD_PORT=6817 SLURM_REST_PORT=6820 ;;
  26.05) SLURM_SUITE=sid SLURM_SUFFIX=-26.05 SLURM_BRIDGE=sunk-slurm26 SLURM_NET=10.77.1 SLURM_NETNS=sunk-slurm26-n
    SLURM_VETH=sunk-s26n SLURM_CTLD_PORT=6827 SLURM_REST_PORT=6821 ;;
  *) printf '[sunk] error: SUNK_SLURM_VERSION=%s: supported are 24.11 and 26.05\n' "$SUNK_SLURM_VERSION" >&2; exit 1 ;;
esac
# The Debian mirror of every root filesystem built with mmdebstrap (provision.sh, images.sh).
DEBIAN_MIRROR=${DEBIAN_MIRROR:-${TRIXIE_MIRROR:-http://deb.debian.org/debian}}
SLURM_ROOTFS=$SUNK_CACHE/rootfs/slurm$SLURM_SUFFIX     # hack/provision.sh rootfs
SLURM_STATE=$SUNK_STATE/slurm$SLURM_SUFFIX              # hack/env-slurm.sh
export SUNK_SLURM_VERSION

log() { printf '\033[1m[sunk]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[31m[sunk] error:\033[0m %s\n' "$*" >&2; exit 1; }

# stamp_ok NAME INPUT...: true when NAME was last produced from exactly these inputs.
stamp_of() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
stamp_ok() { local n=$1; shift; [ -f "$SUNK_CACHE/stamps/$n" ] && [ "$(cat "$SUNK_CACHE/stamps/$n")" = "$(stamp_of "$@")" ]; }
stamp_set() { local n=$1; shift; mkdir -p "$SUNK_CACHE/stamps"; stamp_of "$@" > "$SUNK_CACHE/stamps/$n"; }

# wait_for DESC SECONDS CMD...: poll CMD every 0.2 s until it succeeds or the deadline passes.
wait_for() {
  local desc=$1 secs=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { log "timed out after ${secs}s waiting for $desc"; return 1; }
    sleep 0.2
  done
}

# start_bg NAME CMD...: run CMD as a daemon of the current environment, logging to $ENV_DIR/logs.
# The daemon inherits no descriptor beyond 0-2: one held by a caller (`flock LOCK make demo`
# holds LOCK open) would otherwise stay locked for as long as the daemon lives.
start_bg() {
  local n=$1; shift
  mkdir -p "$ENV_DIR/logs" "$ENV_DIR/pids"
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    exec setsid "$@"
  ) >"$ENV_DIR/logs/$n.stdout" 2>&1 </dev/null &
  echo $! > "$ENV_DIR/pids/$n"
}

# stop_bg NAME: TERM the daemon's process group, KILL it after 10 s.
stop_bg() {
  local f=$ENV_DIR/pids/$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  if kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; then
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
  fi
  rm -f "$f"
}

# stop_all_bg [NAME-GLOB...]: stop every daemon the current environment started (whose name
# matches one of the globs), all at once: each takes seconds to go, and the kube test bed has a dozen.
stop_all_bg() {
  local f g
  [ $# -gt 0 ] || set -- '*'
  for g in "$@"; do
    for f in "$ENV_DIR"/pids/$g; do [ -e "$f" ] && stop_bg "$(basename "$f")" & done
  done
  wait
  return 0
}

# with_lock NAME CMD...: serialise CMD against other runs (parallel test packages start envs).
with_lock() {
  local n=$1; shift
  mkdir -p "$SUNK_CACHE/locks"
  ( flock 9; "$@" ) 9>"$SUNK_CACHE/locks/$n"
}

# claim_netns_dir: make /run/netns a shared mount point, as `ip netns add` does, before anything
# mounts namespaces in it without doing so (containerd's pod sandboxes). Otherwise a later
# `ip netns add` (env-slurm.sh, anyone) stacks its bind mount over those namespaces, and they can
# no longer be deleted by path ("Device or resource busy").
claim_netns_dir() {
  mkdir -p /run/netns
  findmnt -rn /run/netns >/dev/null || mount --bind /run/netns /run/netns
  mount --make-shared /run/netns
}

# release_netns_dir: `ip netns add` (and CNI) make /run/netns a bind mount; once no namespace is
# left in it, undo that so that a stopped environment leaves no mount behind.
release_netns_dir() {
  [ -d /run/netns ] && [ -z "$(ls -A /run/netns)" ] || return 0
  if findmnt -rn /run/netns >/dev/null; then umount /run/netns 2>/dev/null || true; fi
  rmdir /run/netns 2>/dev/null || true
}
