#!/bin/sh
# Runs inside mmdebstrap's customize hook with the new root as $1: the parts of the Slurm image
# that are not packages. Kept in one place for the offline rootfs and the Dockerfiles.
set -eu
R=$1
# slurmrestd refuses to run as root or as SlurmUser: it gets a user of its own.
chroot "$R" sh -c 'getent passwd slurmrestd >/dev/null || useradd --system --no-create-home --shell /usr/sbin/nologin slurmrestd'
mkdir -p "$R/var/spool/slurmctld" "$R/var/spool/slurmd" "$R/var/log/slurm" "$R/run/slurm" "$R/etc/slurm" "$R/shared"
touch "$R/etc/hosts"
rm -rf "$R/var/cache/apt/archives"/*.deb "$R/var/lib/apt/lists"/*
