#!/usr/bin/env bash
# provision.sh [host|tools|codegen|rootfs|containers|image_containers|images|workloads|all]...: install everything the tests and the demo need.
# `rootfs` builds the root filesystem of SUNK_SLURM_VERSION; `images` (and `all`) first builds
# both releases' root filesystems, because there is a Slurm image of each.
# Idempotent and cached in SUNK_CACHE: a step whose inputs did not change does nothing.
source "$(dirname "$0")/lib.sh"

HOST_PACKAGES=(etcd-server containerd runc containernetworking-plugins iptables conntrack
  mmdebstrap busybox-static iproute2 util-linux openssl curl prometheus
  skopeo umoci docker-registry gcc libc6-dev make ipset)

host() {
  local missing=() p
  for p in "${HOST_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing host packages: ${missing[*]}"
  [ "$(id -u)" = 0 ] || die "installing packages needs root"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  # Debian's prometheus package enables a service on :9090 of every interface; the tests
  # (test/integration/prometheus) run their own on 127.0.0.1, so the service stays off.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service || true
  fi
  # Likewise docker-registry's on :5000: test/integration/container runs its own.
  if [[ " ${missing[*]} " == *" docker-registry "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now docker-registry.service || true
  fi
}

# go_tools MODULE_DIR LDFLAGS PKG...: build tool binaries pinned by a checked-in module
# (MODULE_DIR relative to the checkout). Every tool is static (CGO_ENABLED=0, hack/lib.sh); the
# flags are part of the stamp.
go_tools() {
  local dir=$SUNK_ROOT/$1 ldflags=$2; shift 2
  local what="$ldflags $* CGO_ENABLED=$CGO_ENABLED GOFLAGS=$GOFLAGS"
  stamp_ok "tools-$(basename "$dir")" "$dir/go.mod" "$dir/go.sum" <(echo "$what") && return 0
  log "building $(basename "$dir") tools (cold: minutes; cached afterwards)"
  mkdir -p "$SUNK_BIN"
  # The flags of every build (hack/lib.sh), so that a cold machine compiles each package once.
  (cd "$dir" && go build -ldflags "$ldflags" -o "$SUNK_BIN/" "$@")
  stamp_set "tools-$(basename "$dir")" "$dir/go.mod" "$dir/go.sum" <(echo "$what")
}

tools() {
  local minor ldf="-s -w" p
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    ldf+=" -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=2025-01-01T00:00:00Z"
  done
  # From sunk-scheduler's module (its tool directives), which imports k8s.io/kubernetes: the
  # tools, sunk's image and the scheduler's vet and tests then compile its tree once.
  go_tools scheduler "$ldf" k8s.io/kubernetes/cmd/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy,kubectl}
  # helm, and the test bed's NetworkPolicy enforcement (hack/env-kube.sh start_netpol:
  # kube-router's firewall alone, with iptables and ipset), in one module: kube-router v2.1.0
  # builds on helm's k8s.io 0.31 tree, so a cold machine compiles one tree for both instead of
  # two (kube-router's own 0.29 tree alone took 3.6 min cold).
  go_tools hack/tools/helm-and-kube-router "-s -w -X helm.sh/helm/v3/internal/version.version=v3.16.4 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" \
    helm.sh/helm/v3/cmd/helm github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  go_tools hack/tools/kwok "-s -w" sigs.k8s.io/kwok/cmd/kwok
  # The cluster DNS of env-kube.sh (hack/manifests/coredns.yaml), packed by images.sh: CoreDNS
  # with the Corefile's plugins only (hack/tools/coredns/main.go).
  go_tools hack/tools/coredns "-s -w" .
  # envtest wants etcd, kube-apiserver and kubectl in one folder (KUBEBUILDER_ASSETS).
  mkdir -p "$SUNK_CACHE/envtest"
  ln -sf "$(command -v etcd)" "$SUNK_CACHE/envtest/etcd"
  ln -sf "$SUNK_BIN/kube-apiserver" "$SUNK_CACHE/envtest/kube-apiserver"
  ln -sf "$SUNK_BIN/kubectl" "$SUNK_CACHE/envtest/kubectl"
}

# codegen: controller-gen and oapi-codegen, which only `make generate` and
# hack/gen-slurm-openapi.sh need (not the tests): built on their first use, not by `all`.
codegen() {
  go_tools hack/tools/codegen "-s -w" sigs.k8s.io/controller-tools/cmd/controller-gen github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen
}

# The Slurm root filesystem of $SUNK_SLURM_VERSION (hack/lib.sh): Debian trixie for 24.11, sid
# for 26.05, each with the packages of images/slurm/packages.txt, in a directory and under a
# stamp of its own, so that building one never touches the other.
# The host is bookworm (Slurm 22.05 is too old), so Slurm never touches the host's packages.
# Without docs, man pages and translations, like Debian's slim container images.
ROOTFS_DPKG_OPTS=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*')
# sid's Release file carries a Valid-Until a week ahead (trixie's has none); the package mirror
# this machine and CI reach may be a snapshot older than that, which apt would refuse as expired.
# trixie's packages bring mount along (through systemd); sid's do not, and the tests mount in
# the root filesystem (test/integration/slurm: a node's own /dev). It belongs in packages.txt,
# which would rebuild the 24.11 root filesystem; until then it is sid's extra.
ROOTFS_APT_OPTS=() ROOTFS_EXTRA=
[ "$SLURM_SUITE" = trixie ] || ROOTFS_APT_OPTS=(--aptopt='Acquire::Check-Valid-Until "false"') ROOTFS_EXTRA=,mount
rootfs_inputs() {
  cat "$SUNK_ROOT"/images/slurm/{packages.txt,packages.sh,rootfs-setup.sh}; echo "${ROOTFS_DPKG_OPTS[*]}"
  # trixie's stamp predates this line: leaving it out keeps the 24.11 root filesystem cached.
  [ "$SLURM_SUITE" = trixie ] || echo "suite=$SLURM_SUITE ${ROOTFS_APT_OPTS[*]} $ROOTFS_EXTRA"
}
rootfs() {
  local d=$SUNK_ROOT/images/slurm out=$SLURM_ROOTFS stamp=rootfs-slurm$SLURM_SUFFIX
  stamp_ok "$stamp" <(rootfs_inputs) && [ -x "$out/usr/sbin/slurmctld-wlm" ] && return 0
  local pkgs
  pkgs=$("$d/packages.sh" | paste -sd, -)$ROOTFS_EXTRA
  log "building the Slurm $SUNK_SLURM_VERSION root filesystem from $SLURM_SUITE ($pkgs)"
  rm -rf "$out.tmp" && mkdir -p "$(dirname "$out")"
  mmdebstrap --variant=apt --include="$pkgs" "${ROOTFS_DPKG_OPTS[@]}" "${ROOTFS_APT_OPTS[@]}" \
    --customize-hook="$d/rootfs-setup.sh \"\$1\"" "$SLURM_SUITE" "$out.tmp" "$DEBIAN_MIRROR"
  rm -rf "$out" && mv "$out.tmp" "$out"
  stamp_set "$stamp" <(rootfs_inputs)
}

# apt_layer OUT PKG...: a layer over the Slurm root filesystem of $SUNK_SLURM_VERSION with what
# the packages add: apt in a chroot of an overlay, whose upper directory becomes OUT (with
# overlayfs whiteouts where apt removed files of the root filesystem: use it as an overlay's
# lower directory, never as a tree of its own).
apt_layer() {
  local out=$1; shift
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"/{upper,work,merged}
  # A private mount namespace: the overlay and the chroot's mounts vanish with it.
  unshare --mount --propagation private bash -euc '
    lower=$1 t=$2; shift 2
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$t/upper,workdir=$t/work" "$t/merged"
    mount -t proc proc "$t/merged/proc"
    mount -t tmpfs tmpfs "$t/merged/tmp"
    mount --bind /etc/resolv.conf "$t/merged/etc/resolv.conf"
    chroot "$t/merged" sh -euc "apt-get update -q; DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $*; apt-get clean; rm -rf /var/lib/apt/lists/*"
  ' apt_layer "$SLURM_ROOTFS" "$out.tmp" "$@"
  rm -rf "$out" && mv "$out.tmp/upper" "$out" && rm -rf "$out.tmp"
}

# containers: the layer test/integration/container mounts over the 24.11 root filesystem
# (docs/containers.md): the image's containers packages (images/slurm/packages-containers.txt)
# and libslurm-dev, whose slurm/spank.h the test builds the SPANK plugin against.
containers() {
  local out=$SLURM_ROOTFS-containers stamp=rootfs-containers$SLURM_SUFFIX pkgs
  mapfile -t pkgs < <("$SUNK_ROOT/images/slurm/packages.sh" "$SUNK_ROOT/images/slurm/packages-containers.txt")
  pkgs+=(libslurm-dev)
  # The package list is an input of the stamp, given as a fresh process substitution each
  # time: one kept in a variable is gone after apt_layer's commands, and the stamp's read of it
  # failed the cold run without a word (set -e, pipefail).
  local base=$SUNK_CACHE/stamps/rootfs-slurm$SLURM_SUFFIX
  stamp_ok "$stamp" "$base" <(echo "${pkgs[*]}") && [ -d "$out/usr/bin" ] && return 0
  log "building the containers test layer over the Slurm $SUNK_SLURM_VERSION root filesystem (${pkgs[*]})"
  apt_layer "$out" "${pkgs[@]}"
  stamp_set "$stamp" "$base" <(echo "${pkgs[*]}")
}

# image_containers: the image's layer of images/slurm/packages-containers.txt over the Slurm root
# filesystem of $SUNK_SLURM_VERSION (hack/images.sh packs the two as one). Under a stamp of its own: the root filesystem and its stamp stay as they were.
image_containers() {
  local out=$SLURM_ROOTFS-image-containers stamp=rootfs-image-containers$SLURM_SUFFIX pkgs
  mapfile -t pkgs < <("$SUNK_ROOT/images/slurm/packages.sh" "$SUNK_ROOT/images/slurm/packages-containers.txt")
  local inputs=("$SUNK_CACHE/stamps/rootfs-slurm$SLURM_SUFFIX" "$SUNK_ROOT/images/slurm/packages-containers.txt")
  stamp_ok "$stamp" "${inputs[@]}" && [ -x "$out/usr/bin/skopeo" ] && return 0
  log "building the image's containers layer over the Slurm $SUNK_SLURM_VERSION root filesystem (${pkgs[*]})"
  apt_layer "$out" "${pkgs[@]}"
  stamp_set "$stamp" "${inputs[@]}"
}

# rootfs_all: the root filesystems of both releases, each in its own run (hack/lib.sh picks the
# paths by SUNK_SLURM_VERSION when it is sourced); a cached one costs a stamp check.
rootfs_all() {
  local v
  for v in 24.11 26.05; do SUNK_SLURM_VERSION=$v "$SUNK_ROOT/hack/provision.sh" rootfs image_containers; done
}

# images packs an image per Slurm release (hack/images.sh), so it needs both root filesystems
# and their containers layers.
images() {
  rootfs_all
  "$SUNK_ROOT/hack/images.sh"
}

# workloads: the images of the JobSet and LeaderWorkerSet controllers that the test bed runs for
# sunk-scheduler's end-to-end test (hack/workload-controllers.sh build: each built from its Go
# module at the pinned version; cold a few minutes, stamped). Not in `images`, which is what
# `make images` builds for users: sunk's and Slurm's.
workloads() { "$SUNK_ROOT/hack/workload-controllers.sh" build; }

# tools_beside_rootfs: the Go tools (compiling: both cores, most of a cold provisioning) and,
# meanwhile, the root filesystems and their layers (downloads and dpkg: about one core), which
# need nothing of the tools; the images need both. The root filesystems' output goes to a file,
# shown in part when they are done and whole when they failed.
tools_beside_rootfs() {
  local out pid rc=0
  out=$(mktemp "${TMPDIR:-/tmp}/sunk-rootfs.XXXXXX")
  { rootfs_all; containers; } >"$out" 2>&1 &
  pid=$!
  # shellcheck disable=SC2064 # the pid and file are known now
  trap "kill $pid 2>/dev/null; rm -f $out" EXIT
  tools
  wait "$pid" || rc=$?
  trap - EXIT
  if [ "$rc" != 0 ]; then
    cat "$out" >&2; rm -f "$out"
    die "building the Slurm root filesystems failed (exit $rc); their output is above"
  fi
  grep -a '\[sunk\]' "$out" >&2 || true
  rm -f "$out"
}

[ $# -gt 0 ] || set -- all
for step in "$@"; do
  case $step in
    all) host; tools_beside_rootfs; images; workloads ;;
    host|tools|codegen|rootfs|containers|image_containers|images|workloads) $step ;;
    *) die "unknown step $step (host|tools|codegen|rootfs|containers|image_containers|images|workloads|all)" ;;
  esac
done
