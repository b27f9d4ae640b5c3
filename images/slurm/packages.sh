#!/bin/sh
# packages.sh [packages.txt]: the package names of packages.txt, one per line. Both the offline
# root filesystem (hack/provision.sh rootfs) and the Dockerfile install exactly this output.
set -eu
list=${1:-$(dirname "$0")/packages.txt}
awk '{ sub(/#.*/, ""); for (i = 1; i <= NF; i++) print $i }' "$list"
