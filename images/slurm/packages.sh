#!/bin/sh
# packages.sh [packages.txt]: the package names of packages.txt, one per line. The image's root
# filesystem (hack/provision.sh rootfs and image_containers) installs exactly this output.
set -eu
list=${1:-$(dirname "$0")/packages.txt}
awk '{ sub(/#.*/, ""); for (i = 1; i <= NF; i++) print $i }' "$list"
