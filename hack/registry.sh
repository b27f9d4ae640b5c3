# registry.sh: the test bed's image registry. Sourced by env-kube.sh, never run.
#
# Images reach the nodes as they reach a user's: hack/images.sh builds them (docker-archive
# tarballs in $SUNK_IMAGES), push_images pushes each one that changed to a registry the test bed
# runs (Debian's docker-registry on the host, $REGISTRY_ADDR, plain HTTP, its storage in the
# cache so that a warm machine pushes nothing), and every node's containerd pulls them from it
# (pull_images). The images keep their names (sunk.dev/slurm:26.05-local, registry.k8s.io/pause:3.10,
# docker.io/library/busybox:local, ...): each node's hosts.toml ($ENV_DIR/certs.d, containerd's
# config_path) sends those registries to this one, for kubelet's pulls through the CRI as for
# pull_images' through ctr. $ENV_DIR/registry holds its address, for tests that push as a user
# does (TestHelmJourney: make images REGISTRY=...).

REGISTRY_PORT=${SUNK_REGISTRY_PORT:-5050}
REGISTRY_DIR=$SUNK_CACHE/registry
# Mirrored registries: the hosts of every image hack/images.sh names.
MIRRORED_REGISTRIES="sunk.dev registry.k8s.io docker.io"

registry_addr() { echo "$NODE_IP:$REGISTRY_PORT"; }
registry_ready() { curl -sf -o /dev/null "http://$(registry_addr)/v2/"; }

# start_registry: the registry daemon and the nodes' hosts.toml.
start_registry() {
  local r
  mkdir -p "$REGISTRY_DIR/data" "$ENV_DIR/certs.d"
  # The registry under its own name too, for images pushed as a user does (make images
  # REGISTRY=$(cat $ENV_DIR/registry)/...): plain HTTP.
  registry_addr > "$ENV_DIR/registry"
  for r in $MIRRORED_REGISTRIES $(registry_addr); do
    mkdir -p "$ENV_DIR/certs.d/$r"
    cat > "$ENV_DIR/certs.d/$r/hosts.toml" <<TOML
server = "http://$(registry_addr)"
[host."http://$(registry_addr)"]
  capabilities = ["pull", "resolve"]
TOML
  done
  registry_ready && return 0
  cat > "$ENV_DIR/registry.yml" <<YAML
version: 0.1
storage: {filesystem: {rootdirectory: $REGISTRY_DIR/data}, delete: {enabled: true}}
http: {addr: "$(registry_addr)"}
log: {level: warn, accesslog: {disabled: true}}
YAML
  start_bg registry docker-registry serve "$ENV_DIR/registry.yml"
  wait_for "the registry at $(registry_addr)" 30 registry_ready || { tail -n 20 "$ENV_DIR/logs/registry.stdout" >&2; return 1; }
}

# image_ref TAR: the name the tarball's image carries (hack/mkimage.sh's RepoTags).
image_ref() { tar -xOf "$1" manifest.json | sed -n 's/.*"RepoTags":\["\([^"]*\)"\].*/\1/p'; }
# registry_path REF: REF's repository and tag within its registry (sunk.dev/slurm:26.05-local
# is slurm:26.05-local, docker.io/library/busybox:local library/busybox:local).
registry_path() { echo "${1#*/}"; }

# push_images: push every tarball that changed since its last push (size and mtime, and the
# registry still has it) to the registry, in parallel.
push_images() {
  local img ref seen pids=() p
  mkdir -p "$REGISTRY_DIR/pushed"
  for img in "$SUNK_IMAGES"/*.tar; do
    [ -e "$img" ] || continue
    ref=$(image_ref "$img") seen=$REGISTRY_DIR/pushed/$(basename "$img")
    [ -n "$ref" ] || die "$img names no image (manifest.json RepoTags)"
    if [ "$(cat "$seen" 2>/dev/null)" = "$(stat -c '%s %Y' "$img")" ] &&
      curl -sf -o /dev/null -I -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
        "http://$(registry_addr)/v2/$(registry_path "$ref" | sed 's#:#/manifests/#')"; then
      continue
    fi
    { skopeo copy -q --dest-tls-verify=false "docker-archive:$img" "docker://$(registry_addr)/$(registry_path "$ref")" &&
      stat -c '%s %Y' "$img" > "$seen"; } & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { log "pushing images to $(registry_addr) failed"; return 1; }; done
}

# pull_images K: node K's containerd pulls every image of $SUNK_IMAGES from the registry that it
# has not pulled since the image was last pushed.
pull_images() {
  local k=$1 dir img ref seen pids=() p
  dir=$ENV_DIR; [ "$k" = 1 ] || dir=$(node_dir "$k")
  mkdir -p "$dir/pulled"
  for img in "$SUNK_IMAGES"/*.tar; do
    [ -e "$img" ] || continue
    ref=$(image_ref "$img") seen=$dir/pulled/$(basename "$img")
    [ "$(cat "$seen" 2>/dev/null)" = "$(cat "$REGISTRY_DIR/pushed/$(basename "$img")")" ] && continue
    { ctr -a "$dir/containerd/containerd.sock" -n k8s.io images pull --hosts-dir "$ENV_DIR/certs.d" "$ref" >/dev/null 2>>"$ENV_DIR/logs/pull-$(node_name "$k").log" &&
      cp "$REGISTRY_DIR/pushed/$(basename "$img")" "$seen"; } & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { log "$(node_name "$k") pulling images from $(registry_addr) failed"; return 1; }; done
}
