#!/usr/bin/env bash
# nodewatch.sh: builds sunk-slurm-nodes (images/slurm/nodewatch, docs/syncer.md) for the Slurm of
# $SUNK_SLURM_VERSION and prints the binary's path ($SUNK_CACHE/bin/sunk-slurm-nodes-<release>).
#
# The program is C against Slurm's own library: it must be built with the slurm.h of the very
# release that runs it (node_info_t changes between releases). Offline and without touching the
# cached root filesystem: the headers come from that release's libslurm-dev, downloaded once from
# $DEBIAN_MIRROR (apt with a private state directory and the root filesystem's keyring) and
# unpacked under $SUNK_CACHE/slurm-dev/<version>; the program links the root filesystem's
# libslurmfull.so (what scontrol links; Debian's libslurm.so.NN is another package the image
# does not carry). The host's gcc builds it (the host's glibc is older than trixie's and sid's,
# so the binary runs in either); --allow-shlib-undefined because libslurmfull needs symbols of
# the newer glibc, which it finds at run time in the root filesystem.
source "$(dirname "$0")/lib.sh"
R=$SLURM_ROOTFS
[ -x "$R/usr/sbin/slurmctld-wlm" ] || "$SUNK_ROOT/hack/provision.sh" rootfs
ver=$(dpkg-query --admindir="$R/var/lib/dpkg" -W -f '${Version}' slurm-client)
dev=$SUNK_CACHE/slurm-dev/$ver
if [ ! -f "$dev/usr/include/slurm/slurm.h" ]; then
  apt_dir=$SUNK_CACHE/apt-$SLURM_SUITE
  mkdir -p "$apt_dir"/{lists/partial,archives/partial,etc}
  echo "deb [signed-by=$R/usr/share/keyrings/debian-archive-keyring.gpg] $DEBIAN_MIRROR $SLURM_SUITE main" > "$apt_dir/etc/sources.list"
  opts=(-o Dir::State="$apt_dir" -o Dir::State::Lists="$apt_dir/lists" -o Dir::State::status=/dev/null
    -o Dir::Cache="$apt_dir" -o Dir::Etc::SourceList="$apt_dir/etc/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o Acquire::Check-Valid-Until=false -o APT::Sandbox::User=root -o APT::Architecture=amd64)
  log "downloading libslurm-dev $ver from $DEBIAN_MIRROR ($SLURM_SUITE)"
  apt-get "${opts[@]}" -qq update
  (cd "$apt_dir/archives" && apt-get "${opts[@]}" -qq download "libslurm-dev=$ver")
  rm -rf "$dev.tmp" && mkdir -p "$dev.tmp"
  dpkg-deb -x "$apt_dir/archives/libslurm-dev_${ver//:/%3a}_amd64.deb" "$dev.tmp"
  rm -rf "$dev" && mv "$dev.tmp" "$dev"
fi
out=$SUNK_BIN/sunk-slurm-nodes-$SUNK_SLURM_VERSION
src=$SUNK_ROOT/images/slurm/nodewatch
stamp=nodewatch-$SUNK_SLURM_VERSION
if ! { stamp_ok "$stamp" "$src"/*.c "$src"/Makefile <(echo "$ver") && [ -x "$out" ]; }; then
  make -s -C "$src" OUT="$SUNK_BIN" BIN="$(basename "$out")" SLURM_INCLUDE="$dev/usr/include" \
    SLURM_LIBDIR="$R/usr/lib/x86_64-linux-gnu/slurm-wlm" LDEXTRA=-Wl,--allow-shlib-undefined >&2
  stamp_set "$stamp" "$src"/*.c "$src"/Makefile <(echo "$ver")
fi
echo "$out"
