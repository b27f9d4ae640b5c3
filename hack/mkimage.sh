#!/usr/bin/env bash
# mkimage.sh ROOTFS REF OUT.tar ENTRYPOINT_JSON [CMD_JSON]: a single-layer docker-archive image
# that `ctr images import` loads with no registry. Reproducible: sorted, numeric owners, mtime 0.
set -euo pipefail
rootfs=$1 ref=$2 out=$3 entrypoint=$4 cmd=${5:-null}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
tar -C "$rootfs" --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -cf "$w/layer.tar" .
layer=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
mkdir "$w/$layer" && mv "$w/layer.tar" "$w/$layer/layer.tar"
cat > "$w/config.json" <<JSON
{"architecture":"amd64","os":"linux","config":{"Entrypoint":$entrypoint,"Cmd":$cmd,"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:$layer"]},"history":[{"created_by":"sunk hack/mkimage.sh"}]}
JSON
config=$(sha256sum "$w/config.json" | cut -d' ' -f1)
mv "$w/config.json" "$w/$config.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]\n' "$config" "$ref" "$layer" > "$w/manifest.json"
mkdir -p "$(dirname "$out")"
tar -C "$w" -cf "$out.tmp" manifest.json "$config.json" "$layer"
mv "$out.tmp" "$out"
