#!/bin/sh
# build.sh ROOT: sunk's image as a directory tree, the recipe of sunk.dev/sunk (hack/images.sh,
# for `make images` and the test bed): every command of
# cmd/ and sunk-scheduler (scheduler/, a Go module of its own), static, in ROOT/usr/local/bin; a
# passwd and group with the non-root user 65532 the charts run as; a sticky /tmp. Run from the
# repository root.
set -eu
root=${1:?usage: build.sh ROOT}
mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp"
chmod 1777 "$root/tmp"
bin=$(cd "$root/usr/local/bin" && pwd)
CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags '-s -w' -o "$bin/" ./cmd/...
(cd scheduler && CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags '-s -w' -o "$bin/" ./cmd/sunk-scheduler)
printf 'root:x:0:0:root:/:/sbin/nologin\nsunk:x:65532:65532:sunk:/tmp:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nsunk:x:65532:\n' > "$root/etc/group"
