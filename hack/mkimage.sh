#!/usr/bin/env bash
# mkimage.sh ROOTFS[:DIR...] REF OUT.tar ENTRYPOINT_JSON [CMD_JSON]: a docker-archive image that
# `ctr images import` loads with no registry. ROOTFS is the first layer, with its numeric owners
# (a root filesystem built as root); each DIR (a tree of the repository) is one more layer on
# top, owned by root with modes u+rwX,go=rX whatever the checkout's umask. Reproducible: sorted,
# mtime 0.
set -euo pipefail
layers=$1 ref=$2 out=$3 entrypoint=$4 cmd=${5:-null}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
IFS=: read -ra dirs <<< "$layers"
layer_dirs=()
diff_ids="" tars="" history="" first=1
for d in "${dirs[@]}"; do
  if [ -n "$first" ]; then
    tar -C "$d" --numeric-owner --sort=name --mtime=@0 -cf "$w/layer.tar" .
    first=""
  else
    tar -C "$d" --numeric-owner --owner=0 --group=0 --mode=u+rwX,go=rX --sort=name --mtime=@0 -cf "$w/layer.tar" .
  fi
  layer=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
  mkdir -p "$w/$layer" && mv "$w/layer.tar" "$w/$layer/layer.tar"
  diff_ids+="${diff_ids:+,}\"sha256:$layer\"" tars+="${tars:+,}\"$layer/layer.tar\""
  history+="${history:+,}{\"created_by\":\"sunk hack/mkimage.sh, layer ${#layer_dirs[@]}\"}"
  layer_dirs+=("$layer")
done
cat > "$w/config.json" <<JSON
{"architecture":"amd64","os":"linux","config":{"Entrypoint":$entrypoint,"Cmd":$cmd,"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":[$diff_ids]},"history":[$history]}
JSON
config=$(sha256sum "$w/config.json" | cut -d' ' -f1)
mv "$w/config.json" "$w/$config.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":[%s]}]\n' "$config" "$ref" "$tars" > "$w/manifest.json"
mkdir -p "$(dirname "$out")"
tar -C "$w" -cf "$out.tmp" manifest.json "$config.json" "${layer_dirs[@]}"
mv "$out.tmp" "$out"
