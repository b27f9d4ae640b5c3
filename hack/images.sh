#!/usr/bin/env bash
# images.sh: the images of the test bed as docker-archive tarballs in $SUNK_IMAGES (no registry).
#   registry.k8s.io/pause:3.10        the pod sandbox (images/pause, a Go PID 1)
#   docker.io/library/busybox:local   Debian's busybox-static, for small test pods
#   sunk.dev/slurm:24.11-local        the Slurm root filesystem of images/slurm/packages.txt and packages-containers.txt
#                                     + images/slurm/rootfs + sunk-container and the SPANK plugin
#                                     + sunk-nodewatch and sunk-slurm-nodes (hack/nodewatch.sh), sunk-tlsproxy
#   sunk.dev/slurm:26.05-local        the same from Debian sid (Slurm 26.05); `slurm` packs both
#   sunk.dev/coredns:local            the cluster DNS (hack/tools/coredns, hack/manifests/coredns.yaml)
#   sunk.dev/slapd:local              Debian trixie's slapd (OpenLDAP): the slurm chart's directory
#                                     (images/slapd: its entrypoint seeds a fresh directory)
#   sunk.dev/sunk:local               sunk's controllers: every ./cmd/* and scheduler/cmd/sunk-scheduler (its
#                                     own module) as static binaries in /usr/local/bin
# With arguments, only the images named (pause busybox coredns slurm slapd sunk).
source "$(dirname "$0")/lib.sh"
mk=$SUNK_ROOT/hack/mkimage.sh

pause() {
  stamp_ok image-pause "$SUNK_ROOT/images/pause/main.go" "$mk" && [ -f "$SUNK_IMAGES/pause.tar" ] && return 0
  local r; r=$(mktemp -d)
  (cd "$SUNK_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$r/pause" ./images/pause)
  "$mk" "$r" registry.k8s.io/pause:3.10 "$SUNK_IMAGES/pause.tar" '["/pause"]'
  rm -rf "$r"; stamp_set image-pause "$SUNK_ROOT/images/pause/main.go" "$mk"
}

busybox() {
  stamp_ok image-busybox /bin/busybox "$mk" && [ -f "$SUNK_IMAGES/busybox.tar" ] && return 0
  local r a; r=$(mktemp -d)
  mkdir -p "$r"/{bin,etc,tmp,proc,sys,dev}
  cp /bin/busybox "$r/bin/"
  for a in $("$r/bin/busybox" --list); do [ "$a" = busybox ] || ln -sf busybox "$r/bin/$a"; done
  echo 'root:x:0:0:root:/:/bin/sh' > "$r/etc/passwd"; echo 'root:x:0:' > "$r/etc/group"
  "$mk" "$r" docker.io/library/busybox:local "$SUNK_IMAGES/busybox.tar" null '["/bin/sh"]'
  rm -rf "$r"; stamp_set image-busybox /bin/busybox "$mk"
}

# The static coredns binary that provision.sh's tools step builds into $SUNK_BIN.
coredns() {
  local inputs=("$SUNK_CACHE/stamps/tools-coredns" "$mk")
  stamp_ok image-coredns "${inputs[@]}" && [ -f "$SUNK_IMAGES/coredns.tar" ] && return 0
  [ -x "$SUNK_BIN/coredns" ] || die "no $SUNK_BIN/coredns: run hack/provision.sh tools"
  local r; r=$(mktemp -d)
  mkdir -p "$r"/{etc/coredns,tmp}
  cp "$SUNK_BIN/coredns" "$r/coredns"
  "$mk" "$r" sunk.dev/coredns:local "$SUNK_IMAGES/coredns.tar" '["/coredns"]' '["-conf","/etc/coredns/Corefile"]'
  rm -rf "$r"; stamp_set image-coredns "${inputs[@]}"
}

# The cached root filesystem (hack/provision.sh rootfs) with images/slurm/rootfs (sunk-entrypoint,
# sunk-ready, ...) as a second layer: editing a script repacks the image, never rebuilds the rootfs.
# tree_inputs DIR: the names, modes and contents of a tree of the repository, for a stamp.
tree_inputs() {
  (cd "$1" && find . -printf '%y %m %p\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat)
}
# One image per Slurm release, each from its own root filesystem (hack/lib.sh: rootfs/slurm for
# 24.11 from trixie, rootfs/slurm-26.05 from sid) under a stamp and tarball of its own, so that
# repacking one never touches the other.
#   24.11: sunk.dev/slurm:24.11-local, slurm.tar        26.05: sunk.dev/slurm:26.05-local, slurm-26.05.tar
# Layers: the root filesystem with its containers layer (hack/provision.sh image_containers:
# images/slurm/packages-containers.txt) seen through one overlay, as one apt-get would leave
# them; images/slurm/rootfs; the containers build (containers_build: sunk-container and
# the SPANK plugin of that release).

# The static helper sunk-container (docs/containers.md), once for both releases, under a stamp
# of the Go files it is built from.
helper_inputs() {
  cat "$SUNK_ROOT/go.mod" "$SUNK_ROOT/go.sum"
  local dirs
  dirs=$(cd "$SUNK_ROOT" && go list -deps -f '{{if .Module}}{{if eq .Module.Path "sunk.dev/sunk"}}{{.Dir}}{{end}}{{end}}' ./cmd/sunk-container)
  echo "${dirs//$SUNK_ROOT/}"
  for d in $dirs; do find "$d" -maxdepth 1 -name '*.go' ! -name '*_test.go' | LC_ALL=C sort | xargs cat; done
}
helper() {
  local out=$SUNK_CACHE/build/sunk-container
  stamp_ok build-sunk-container <(helper_inputs) && [ -x "$out" ] && return 0
  log "building sunk-container (static)"
  mkdir -p "$(dirname "$out")"
  (cd "$SUNK_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$out.tmp" ./cmd/sunk-container)
  mv "$out.tmp" "$out"
  stamp_set build-sunk-container <(helper_inputs)
}

# containers_build SUFFIX: $SUNK_CACHE/build/slurm-containers$SUFFIX, the image's files for
# containers: sunk-container and sunk_container.so, the SPANK plugin built against the headers of
# the image's own Slurm (hack/slurm-dev.sh; slurmstepd loads a plugin of its own release only)
# with the host's gcc: it links nothing of Slurm, and the host's glibc is older than trixie's and
# sid's.
spank_inputs() { # VERSION
  local src=$SUNK_ROOT/images/slurm/spank
  cat "$src"/*.c "$src"/*.h "$src"/Makefile "$src"/exports.map; echo "$1"
  dpkg-query --admindir="$SUNK_CACHE/rootfs/slurm$2/var/lib/dpkg" -W -f '${Version}' slurm-client
}
containers_build() { # VERSION SUFFIX
  local v=$1 sfx=$2 out=$SUNK_CACHE/build/slurm-containers$2
  helper
  if ! { stamp_ok "build-slurm-containers$sfx" <(spank_inputs "$v" "$sfx") "$SUNK_CACHE/stamps/build-sunk-container" &&
    [ -f "$out/usr/local/lib/sunk/spank/sunk_container.so" ]; }; then
    local include
    include=$(SUNK_SLURM_VERSION=$v "$SUNK_ROOT/hack/slurm-dev.sh")
    log "building the SPANK plugin against Slurm $v's headers"
    rm -rf "$out.tmp" && mkdir -p "$out.tmp/usr/local/lib/sunk/spank" "$out.tmp/usr/local/bin"
    make -s -C "$SUNK_ROOT/images/slurm/spank" SLURM_INCLUDE="$include" OUT="$out.tmp/usr/local/lib/sunk/spank" >&2
    cp "$SUNK_CACHE/build/sunk-container" "$out.tmp/usr/local/bin/"
    rm -rf "$out" && mv "$out.tmp" "$out"
    stamp_set "build-slurm-containers$sfx" <(spank_inputs "$v" "$sfx") "$SUNK_CACHE/stamps/build-sunk-container"
  fi
}
slurm_inputs() { # SUFFIX
  cat "$SUNK_CACHE/stamps/rootfs-slurm$1" "$SUNK_CACHE/stamps/rootfs-image-containers$1" "$mk"
  tree_inputs "$SUNK_ROOT/images/slurm/rootfs"
  tree_inputs "$SUNK_CACHE/build/slurm-containers$1"
  tree_inputs "$SUNK_CACHE/layers/slurm-bin$1"
}
# slurm_bin_layer VERSION SUFFIX: the last layer, the node watcher beside slurmctld:
# sunk-nodewatch (static Go) and its reader sunk-slurm-nodes, C built against this release's
# Slurm by hack/nodewatch.sh; and slurmrestd's TLS terminator, sunk-tlsproxy (static Go). Rebuilt each time (seconds warm: both builds are cached); the
# image's stamp covers its contents, and -trimpath keeps them the same for the same sources.
slurm_bin_layer() {
  local d=$SUNK_CACHE/layers/slurm-bin$2 reader
  reader=$(SUNK_SLURM_VERSION=$1 "$SUNK_ROOT/hack/nodewatch.sh")
  rm -rf "$d.tmp" && mkdir -p "$d.tmp/usr/local/bin"
  install -m 0755 "$reader" "$d.tmp/usr/local/bin/sunk-slurm-nodes"
  (cd "$SUNK_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$d.tmp/usr/local/bin/sunk-nodewatch" ./cmd/sunk-nodewatch)
  (cd "$SUNK_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$d.tmp/usr/local/bin/sunk-tlsproxy" ./cmd/sunk-tlsproxy)
  rm -rf "$d" && mv "$d.tmp" "$d"
}
slurm_image() { # VERSION SUFFIX
  local v=$1 sfx=$2 tar=$SUNK_IMAGES/slurm$2.tar
  local base=$SUNK_CACHE/rootfs/slurm$sfx ctr=$SUNK_CACHE/rootfs/slurm$sfx-image-containers
  [ -f "$SUNK_CACHE/stamps/rootfs-slurm$sfx" ] || die "no Slurm $v root filesystem: run hack/provision.sh images"
  [ -f "$SUNK_CACHE/stamps/rootfs-image-containers$sfx" ] || die "no containers layer for Slurm $v: run hack/provision.sh images"
  containers_build "$v" "$sfx"
  slurm_bin_layer "$v" "$sfx"
  stamp_ok "image-slurm$sfx" <(slurm_inputs "$sfx") && [ -f "$tar" ] && return 0
  log "packing the Slurm $v root filesystem, its containers layer, images/slurm/rootfs, the containers build and the node watcher into sunk.dev/slurm:$v-local"
  # The first layer is the overlay of the two (it applies the whiteouts apt left), in a mount
  # namespace of this command alone.
  unshare --mount --propagation private bash -euc '
    m=$(mktemp -d); trap "umount $m; rmdir $m" EXIT
    mount -t overlay overlay -o "ro,lowerdir=$1" "$m"
    "$2" "$m:$3" "$4" "$5" "$6"
  ' pack "$ctr:$base" "$mk" "$SUNK_ROOT/images/slurm/rootfs:$SUNK_CACHE/build/slurm-containers$sfx:$SUNK_CACHE/layers/slurm-bin$sfx" \
    "sunk.dev/slurm:$v-local" "$tar" '["/usr/local/sbin/sunk-entrypoint"]'
  stamp_set "image-slurm$sfx" <(slurm_inputs "$sfx")
}
slurm() { slurm_image 24.11 ""; slurm_image 26.05 -26.05; }

# slapd: trixie's slapd and ldap-utils (essential variant: no apt), cached in rootfs/slapd under
# a stamp of its own, with images/slapd/rootfs (the entrypoint) as a second layer. Cold: about a
# minute; the Slurm image and its root filesystem are untouched.
SLAPD_PKGS=slapd,ldap-utils
slapd_inputs() {
  echo "$SLAPD_PKGS"; cat "$mk"
  tree_inputs "$SUNK_ROOT/images/slapd/rootfs"
}
slapd() {
  stamp_ok image-slapd <(slapd_inputs) && [ -f "$SUNK_IMAGES/slapd.tar" ] && return 0
  local out=$SUNK_CACHE/rootfs/slapd
  if ! stamp_ok rootfs-slapd <(echo "$SLAPD_PKGS") || [ ! -x "$out/usr/sbin/slapd" ]; then
    log "building the slapd root filesystem from trixie ($SLAPD_PKGS)"
    rm -rf "$out.tmp" && mkdir -p "$(dirname "$out")"
    mmdebstrap --variant=essential --include="$SLAPD_PKGS" --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
      trixie "$out.tmp" "$DEBIAN_MIRROR"
    rm -rf "$out" && mv "$out.tmp" "$out"
    stamp_set rootfs-slapd <(echo "$SLAPD_PKGS")
  fi
  log "packing sunk.dev/slapd:local"
  "$mk" "$out:$SUNK_ROOT/images/slapd/rootfs" sunk.dev/slapd:local "$SUNK_IMAGES/slapd.tar" '["/usr/local/sbin/slapd-entrypoint"]'
  stamp_set image-slapd <(slapd_inputs)
}

# sunk's own commands (sunk-operator, sunk-syncer, ...: whatever cmd/ holds) and sunk-scheduler
# (scheduler/, a module of its own), static, on an otherwise empty root filesystem with a non-root
# user 65532 and /tmp: images/sunk/build.sh. The stamp
# covers the script, both modules' go.mod/go.sum and non-test Go files, so a code change
# rebuilds, nothing else does.
sunk_inputs() {
  cat "$mk" "$SUNK_ROOT/images/sunk/build.sh" "$SUNK_ROOT/go.mod" "$SUNK_ROOT/go.sum" "$SUNK_ROOT/scheduler/go.mod" "$SUNK_ROOT/scheduler/go.sum"
  local files
  files=$(cd "$SUNK_ROOT" && find api cmd internal pkg scheduler/cmd scheduler/plugin -name '*.go' ! -name '*_test.go' 2>/dev/null | LC_ALL=C sort)
  echo "$files"
  (cd "$SUNK_ROOT" && echo "$files" | xargs cat)
}
sunk() {
  stamp_ok image-sunk <(sunk_inputs) && [ -f "$SUNK_IMAGES/sunk.tar" ] && return 0
  log "building sunk.dev/sunk:local from ./cmd/... and scheduler/cmd/sunk-scheduler"
  local r; r=$(mktemp -d)
  (cd "$SUNK_ROOT" && sh images/sunk/build.sh "$r")
  "$mk" "$r" sunk.dev/sunk:local "$SUNK_IMAGES/sunk.tar" '["/usr/local/bin/sunk-operator"]'
  rm -rf "$r"; stamp_set image-sunk <(sunk_inputs)
}

mkdir -p "$SUNK_IMAGES"
[ $# -gt 0 ] || set -- pause busybox coredns slurm slapd sunk
for img in "$@"; do
  case $img in
    pause|busybox|coredns|slurm|slapd|sunk) $img ;;
    *) die "unknown image $img (pause busybox coredns slurm slapd sunk)" ;;
  esac
done
