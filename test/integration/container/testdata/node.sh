#!/usr/bin/env bash
# node.sh DIR ROOTFS LAYER: one private Slurm node for test/integration/container's Slurm test:
# slurmctld, slurmd and a registry, in namespaces of their own (run as PID 1 of
# `unshare --pid --fork --kill-child --mount --uts --net --propagation private`), so that
# ending the unshare ends every process the test started and every mount it made.
#
#   DIR/root     the node's root: an overlay of LAYER (skopeo, umoci: hack/provision.sh
#                containers) over ROOTFS (Slurm 24.11), upper layer DIR/upper
#   DIR/files    copied over the root: slurm.conf, plugstack.conf, the plugin, the helper
#   DIR/sunk     /var/lib/sunk (containers' state and the image cache): not on the overlay,
#                as on a real node, since a writable container's upper layer is there
#   DIR/logs     the daemons' output
set -euo pipefail
dir=$1 rootfs=$2 layer=$3
R=$dir/root
mkdir -p "$R" "$dir/upper" "$dir/work" "$dir/sunk" "$dir/logs"
mount -t overlay overlay -o "lowerdir=$layer:$rootfs,upperdir=$dir/upper,workdir=$dir/work" "$R"
cp -a "$dir/files/." "$R/"
mkdir -p "$R/var/lib/sunk" "$R/var/spool/slurmctld" "$R/var/spool/slurmd" "$R/var/log/slurm"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount --rbind /dev "$R/dev"
mount -t tmpfs tmpfs "$R/tmp"
mount -t tmpfs tmpfs "$R/run"
# As kubelet makes an emptyDir: 0777, no sticky bit. The compute pod's entrypoint makes it root's,
# 0755, before slurmd starts; TestSlurmSteps plays a job's attack on it before and after that.
chmod 0777 "$dir/sunk"
mount --bind "$dir/sunk" "$R/var/lib/sunk"
hostname c1
# getaddrinfo (AI_ADDRCONFIG) wants an address beyond loopback: a veth pair whose both ends
# stay in this network namespace, so nothing leaves it.
ip link set lo up
ip link add v0 type veth peer name v1
ip addr add 10.77.9.1/24 dev v0
ip link set v0 up
ip link set v1 up
printf '127.0.0.1 localhost\n10.77.9.1 c1\n' > "$R/etc/hosts"
chroot "$R" useradd -m -u 1000 -U -s /bin/sh alice
docker-registry serve "$dir/registry.yml" > "$dir/logs/registry.log" 2>&1 &
chroot "$R" slurmctld -D -i > "$dir/logs/slurmctld.out" 2>&1 &
chroot "$R" slurmd -D > "$dir/logs/slurmd.out" 2>&1 &
echo started > "$dir/logs/node.started"
wait
