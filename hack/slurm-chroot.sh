#!/usr/bin/env bash
# slurm-chroot.sh ENV_DIR HOSTNAME ETC_DIR SPOOL_DIR CMD...: exec CMD inside the cached Slurm root
# filesystem of $SUNK_SLURM_VERSION (hack/lib.sh). Meant to run under `unshare --mount --uts --propagation private`: every mount made
# here lives in that private namespace and vanishes with the daemon, and the cached root
# filesystem itself is never written to.
source "$(dirname "$0")/lib.sh"
env_dir=$1 host=$2 etc=$3 spool=$4; shift 4
R=$SLURM_ROOTFS
hostname "$host"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
# /run is per host name: scontrol run as "slurmctld" reaches slurmctld's sack socket there.
mkdir -p "$env_dir/run/$host"
mount --bind "$env_dir/run/$host" "$R/run"
mount -t tmpfs tmpfs "$R/tmp"
mount --bind "$etc" "$R/etc/slurm"
mount --bind "$spool" "$R/var/spool"
mount --bind "$env_dir/logs" "$R/var/log/slurm"
mount --bind "$env_dir/hosts" "$R/etc/hosts"
mount --bind "$env_dir/shared" "$R/shared"
exec chroot "$R" "$@"
