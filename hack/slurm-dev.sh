#!/usr/bin/env bash
# slurm-dev.sh: prints the include directory of libslurm-dev for the Slurm of $SUNK_SLURM_VERSION
# ($SUNK_CACHE/slurm-dev/<version>/usr/include), the exact version of its root filesystem's
# Slurm. Programs built against Slurm's headers must use the very release that loads them
# (sunk-slurm-nodes: node_info_t changes between releases; the SPANK plugin: slurmstepd checks
# plugin_version). Offline and without touching the cached root filesystem: the package is
# downloaded once from $DEBIAN_MIRROR (apt with a private state directory and the root
# filesystem's keyring) and unpacked.
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
echo "$dev/usr/include"
