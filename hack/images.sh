#!/usr/bin/env bash
# images.sh: the images of the test bed as docker-archive tarballs in $SUNK_IMAGES (no registry).
#   registry.k8s.io/pause:3.10        the pod sandbox (images/pause, a Go PID 1)
#   docker.io/library/busybox:local   Debian's busybox-static, for small test pods
#   sunk.dev/slurm:24.11-local        the Slurm root filesystem of images/slurm/packages.txt
#   sunk.dev/coredns:local            the cluster DNS (hack/tools/coredns, hack/manifests/coredns.yaml)
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

slurm() {
  local inputs=("$SUNK_CACHE/stamps/rootfs-slurm" "$mk")
  stamp_ok image-slurm "${inputs[@]}" && [ -f "$SUNK_IMAGES/slurm.tar" ] && return 0
  log "packing the Slurm root filesystem into sunk.dev/slurm:24.11-local"
  "$mk" "$SUNK_CACHE/rootfs/slurm" sunk.dev/slurm:24.11-local "$SUNK_IMAGES/slurm.tar" null '["/bin/bash"]'
  stamp_set image-slurm "${inputs[@]}"
}

mkdir -p "$SUNK_IMAGES"
pause; busybox; coredns; slurm
