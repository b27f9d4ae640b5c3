package container

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Cache is a node's image cache (docs/containers.md, "Images"):
//
//	DIR/locks/KEY      flock per reference, then per digest: concurrent pulls of one image pull once
//	DIR/oci/HEX        the image as skopeo copied it (an OCI layout), deleted once unpacked
//	DIR/rootfs/HEX     the unpacked root filesystem, named by the manifest's digest; read-only
//	DIR/rootfs/HEX.env the image's environment (imageenv.go)
//	DIR/rootfs/HEX.entrypoint its entrypoint, if it has one (entrypoint.go)
//
// and the records of its bound (cache_linux.go).
type Cache struct {
	Dir string
	// Insecure are registries (HOST[:PORT]) reached over plain HTTP: the node's setting, for a
	// registry inside the cluster (the test bed's).
	Insecure []string
	// Max bounds the bytes of the cached images and pulls in progress (0: no bound); an image
	// that does not fit fails its step (CacheFullError).
	Max int64
	// StateDir holds the containers' directories, whose usesFile say which images are in use.
	StateDir string
	// Auth is where the step's registry credentials come from.
	Auth Auth
}

// Unpacked returns the root filesystem of img, pulling and unpacking it first when the cache
// does not hold it, and records that the container at dir uses it (usesFile): from then on
// until dir is gone the image is not evicted. Errors are one line and name the image.
func (c Cache) Unpacked(img Image, dir string) (string, error) {
	for _, d := range []string{"locks", "oci", "rootfs", "pulls"} {
		if err := mkdirTrusted(filepath.Join(c.Dir, d), 0o700); err != nil {
			return "", err
		}
	}
	authFile, cleanup, err := c.Auth.authFile(img, filepath.Join(c.Dir, "auth"))
	defer cleanup()
	if err != nil {
		return "", err
	}
	// The tag is resolved first: a digest names what is cached, and a moved tag pulls anew.
	unlock, err := c.lock("ref-" + hash(img.String()))
	if err != nil {
		return "", err
	}
	digest, compressed, err := c.manifest(img, authFile)
	unlock()
	if err != nil {
		return "", err
	}
	sum, _ := strings.CutPrefix(digest, "sha256:")
	rootfs := filepath.Join(c.Dir, "rootfs", sum)
	// The second job asking for an image waits here while the first pulls it, then finds it.
	unlock, err = c.lock("digest-" + sum)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Cached already: taken under the cache lock, so no eviction deletes it in between.
	unlockCache, err := c.lock("cache")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(rootfs); err == nil {
		err = use(dir, rootfs)
		unlockCache()
		return rootfs, err
	}
	// Room for the layout and the unpacked tree, as far as the manifest tells.
	estimate := compressed * (1 + unpackFactor)
	err = c.makeRoom(sum, estimate)
	if err == nil {
		err = c.reserve(sum, estimate)
	}
	unlockCache()
	if err != nil {
		return "", fmt.Errorf("%s: %w", img, err)
	}
	// Whatever happens now, no reservation or half-made tree stays.
	defer c.dropPull(sum)
	layout, tmp := filepath.Join(c.Dir, "oci", sum), rootfs+".tmp"
	_ = os.RemoveAll(layout)
	_ = os.RemoveAll(tmp)
	pinned := img
	pinned.Tag, pinned.Digest = "", digest
	args := append([]string{"copy", "--quiet"}, c.tls("--src-tls-verify", img)...)
	args = append(args, creds("--src", authFile)...)
	if _, err := run("skopeo", append(args, pinned.Transport(), "oci:"+layout+":image")...); err != nil {
		return "", fmt.Errorf("%s: %v", img, err)
	}
	// Ownership is kept (root unpacks): the image looks as its author built it, and every
	// mount of it is nosuid,nodev (ns_linux.go).
	if _, err := run("umoci", "raw", "unpack", "--image", layout+":image", tmp); err != nil {
		return "", fmt.Errorf("%s: unpacking: %v", img, err)
	}
	config, err := layoutConfig(layout, "image")
	if err != nil {
		return "", fmt.Errorf("%s: reading its configuration: %v", img, err)
	}
	_ = os.RemoveAll(layout)
	size, err := diskUsage(tmp)
	if err != nil {
		return "", err
	}
	// The measured size decides: the image joins the cache only if it fits.
	if unlockCache, err = c.lock("cache"); err != nil {
		return "", err
	}
	defer unlockCache()
	if err := c.makeRoom(sum, size); err != nil {
		return "", fmt.Errorf("%s: %w", img, err)
	}
	b, _ := json.Marshal(config.Env)
	if err := os.WriteFile(rootfs+".env", b, 0o644); err != nil {
		return "", err
	}
	if len(config.Entrypoint) > 0 {
		b, _ := json.Marshal(config.Entrypoint)
		if err := os.WriteFile(rootfs+entrypointExt, b, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(rootfs+".size", []byte(strconv.FormatInt(size, 10)), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, rootfs); err != nil {
		return "", err
	}
	return rootfs, use(dir, rootfs)
}

// makeRoom evicts the least recently used images no container uses until need more bytes fit
// under Max beside the other pulls in progress, or fails with CacheFullError evicting nothing.
// The caller holds the cache lock.
func (c Cache) makeRoom(sum string, need int64) error {
	if c.Max <= 0 {
		return nil
	}
	s, err := c.state(sum)
	if err != nil {
		return fmt.Errorf("the image cache: %v", err)
	}
	victims, ok := PlanEviction(s.images, s.pending, need, c.Max)
	if !ok {
		return &CacheFullError{Need: need, Have: Available(s.images, s.pending, c.Max), Bound: c.Max}
	}
	return c.evict(victims)
}

// manifest resolves img to its manifest's digest (a digest reference is checked against what
// the registry serves) and the compressed size of its config and layers. The registry is asked
// every time, with the step's credentials, even when the image is cached: the cache is shared
// by the node's users, and a user who may not pull an image must not run it from there.
func (c Cache) manifest(img Image, authFile string) (digest string, size int64, err error) {
	// --raw: the manifest (or multi-platform index) alone, whose sha256 is its digest. Plain
	// inspect would also fetch the config blob and list every tag.
	args := append([]string{"inspect", "--raw"}, c.tls("--tls-verify", img)...)
	args = append(args, creds("-", authFile)...)
	out, err := run("skopeo", append(args, img.Transport())...)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %v", img, err)
	}
	sum := sha256.Sum256([]byte(out))
	digest = "sha256:" + hex.EncodeToString(sum[:])
	if img.Digest != "" && img.Digest != digest {
		return "", 0, fmt.Errorf("%s: the registry served a manifest of digest %s", img, digest)
	}
	return digest, manifestSize([]byte(out)), nil
}

func (c Cache) tls(flag string, img Image) []string {
	for _, r := range c.Insecure {
		if r == img.Registry {
			return []string{flag + "=false"}
		}
	}
	return nil
}

// creds are skopeo's flags for authFile (prefix "--src" for copy, "-" for inspect): that file
// alone, or no credentials. Never skopeo's own lookup, which would read root's files on the node.
func creds(prefix, authFile string) []string {
	if authFile == "" {
		return []string{prefix + "-no-creds"}
	}
	return []string{prefix + "-authfile=" + authFile}
}

// lock takes an exclusive flock on DIR/locks/KEY; the returned func releases it.
func (c Cache) lock(key string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(c.Dir, "locks", key), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

// run runs a tool with a clean environment; its error is its last line of stderr.
func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
			return "", fmt.Errorf("%s", logMessage(last))
		}
		return "", fmt.Errorf("%s: %v", name, err)
	}
	return stdout.String(), nil
}

// logMessage is the msg="..." of a logrus line (skopeo's errors), on one line; other lines
// as they are.
func logMessage(line string) string {
	i := strings.Index(line, ` msg="`)
	if i < 0 {
		return line
	}
	q := line[i+5:]
	// The quoted value ends at the first unescaped quote.
	end := 1
	for end < len(q) && q[end] != '"' {
		if q[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(q) {
		return line
	}
	msg, err := strconv.Unquote(q[:end+1])
	if err != nil {
		return line
	}
	// skopeo inspect wraps every registry error so; the image is named by the caller already.
	if rest, ok := strings.CutPrefix(msg, "Error parsing image name "); ok {
		if _, after, ok := strings.Cut(rest, `": `); ok {
			msg = after
		}
	}
	return strings.Join(strings.Fields(msg), " ")
}
