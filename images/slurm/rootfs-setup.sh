#!/bin/sh
# rootfs-setup.sh ROOT: the parts of the Slurm image that are not packages, run once the packages
# of packages.txt are installed in ROOT. mmdebstrap's customize hook runs it with the
# new root as $1 (hack/provision.sh).
# The runtime scripts (images/slurm/rootfs/) are not added here but on top, as their own layer.
set -eu
R=${1:?usage: rootfs-setup.sh ROOT}
in_root() { if [ "$R" = / ]; then sh -c "$1"; else chroot "$R" sh -c "$1"; fi; }

# Debian's slurm user has the fixed uid/gid 64030 (the operator's fsGroup): fail loudly if not.
[ "$(in_root 'id -u slurm'):$(in_root 'id -g slurm')" = 64030:64030 ] || { echo "rootfs-setup: slurm is not uid/gid 64030" >&2; exit 1; }
# slurmrestd refuses to run as root or as SlurmUser: it gets a user of its own. mariadb-server-core
# does not create the mysql user that mariadb-server would.
in_root 'getent passwd slurmrestd >/dev/null || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin slurmrestd'
in_root 'getent passwd mysql >/dev/null || useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin mysql'

mkdir -p "$R/var/spool/slurmctld" "$R/var/spool/slurmd" "$R/var/log/slurm" "$R/run/slurm" "$R/etc/slurm" \
  "$R/var/lib/mysql" "$R/shared"
chown 64030:64030 "$R/var/spool/slurmctld" "$R/var/log/slurm"
in_root 'chown mysql:mysql /var/lib/mysql'
touch "$R/etc/hosts"

# No secrets in the image: openssh-server and munge generate keys when installed. sshd's host
# keys are made (or copied from a Secret) at container start, in /run (sunk-entrypoint login).
rm -f "$R"/etc/ssh/ssh_host_*_key "$R"/etc/ssh/ssh_host_*_key.pub "$R/etc/munge/munge.key"
# pam_loginuid fails without CAP_AUDIT_CONTROL, which containers do not have: ssh logins would
# fail in their session phase.
if [ -f "$R/etc/pam.d/sshd" ]; then
  sed -i 's/^session[[:space:]]\+required[[:space:]]\+pam_loginuid.so/session    optional     pam_loginuid.so/' "$R/etc/pam.d/sshd"
fi
# Users and groups may come from sssd (login role with /etc/sunk/sssd/sssd.conf); without a
# running sssd the sss module answers "unavailable" at once and files alone decide.
for db in passwd group; do
  grep -q "^$db:.*[[:space:]]sss\b" "$R/etc/nsswitch.conf" || sed -i "s/^\($db:.*\)$/\1 sss/" "$R/etc/nsswitch.conf"
done

rm -rf "$R/var/cache/apt/archives"/*.deb "$R"/var/cache/apt/*.bin "$R/var/lib/apt/lists"/*
