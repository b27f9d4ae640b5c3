#!/usr/bin/env bash
# nodewatch.sh: builds sunk-slurm-nodes (images/slurm/nodewatch, docs/syncer.md) for the Slurm of
# $SUNK_SLURM_VERSION and prints the binary's path ($SUNK_CACHE/bin/sunk-slurm-nodes-<release>).
#
# The program is C against Slurm's own library: it must be built with the slurm.h of the very
# release that runs it (hack/slurm-dev.sh: that release's libslurm-dev, downloaded once); it
# links the root filesystem's libslurmfull.so (what scontrol links; Debian's libslurm.so.NN is
# another package the image does not carry). The host's gcc builds it (the host's glibc is older
# than trixie's and sid's, so the binary runs in either); --allow-shlib-undefined because
# libslurmfull needs symbols of the newer glibc, which it finds at run time in the root filesystem.
source "$(dirname "$0")/lib.sh"
R=$SLURM_ROOTFS
include=$("$SUNK_ROOT/hack/slurm-dev.sh")
ver=$(dpkg-query --admindir="$R/var/lib/dpkg" -W -f '${Version}' slurm-client)
out=$SUNK_BIN/sunk-slurm-nodes-$SUNK_SLURM_VERSION
src=$SUNK_ROOT/images/slurm/nodewatch
stamp=nodewatch-$SUNK_SLURM_VERSION
if ! { stamp_ok "$stamp" "$src"/*.c "$src"/Makefile <(echo "$ver") && [ -x "$out" ]; }; then
  make -s -C "$src" OUT="$SUNK_BIN" BIN="$(basename "$out")" SLURM_INCLUDE="$include" \
    SLURM_LIBDIR="$R/usr/lib/x86_64-linux-gnu/slurm-wlm" LDEXTRA=-Wl,--allow-shlib-undefined >&2
  stamp_set "$stamp" "$src"/*.c "$src"/Makefile <(echo "$ver")
fi
echo "$out"
