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
type Cache struct {
	Dir string
	// Insecure are registries (HOST[:PORT]) reached over plain HTTP: the node's setting, for a
	// registry inside the cluster (the test bed's).
	Insecure []string
}

// Unpacked returns the root filesystem of img, pulling and unpacking it first when the cache
// does not hold it. Errors are one line and name the image.
func (c Cache) Unpacked(img Image) (string, error) {
	for _, d := range []string{"locks", "oci", "rootfs"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return "", err
		}
	}
	// The tag is resolved first: a digest names what is cached, and a moved tag pulls anew.
	unlock, err := c.lock("ref-" + hash(img.String()))
	if err != nil {
		return "", err
	}
	digest, err := c.digest(img)
	unlock()
	if err != nil {
		return "", err
	}
	sum, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || !digestRE.MatchString(digest) {
		return "", fmt.Errorf("%s: the registry answered digest %q", img, digest)
	}
	rootfs := filepath.Join(c.Dir, "rootfs", sum)
	// The second job asking for an image waits here while the first pulls it, then finds it.
	unlock, err = c.lock("digest-" + sum)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(rootfs); err == nil {
		return rootfs, nil
	}
	layout := filepath.Join(c.Dir, "oci", sum)
	tmp := rootfs + ".tmp"
	_ = os.RemoveAll(layout)
	_ = os.RemoveAll(tmp)
	defer os.RemoveAll(layout)
	pinned := img
	pinned.Tag, pinned.Digest = "", digest
	args := append([]string{"copy", "--quiet"}, c.tls("--src-tls-verify", img)...)
	args = append(args, c.creds("--src-no-creds", img)...)
	if _, err := run("skopeo", append(args, pinned.Transport(), "oci:"+layout+":image")...); err != nil {
		return "", fmt.Errorf("%s: %v", img, err)
	}
	// Ownership is kept (root unpacks): the image looks as its author built it, and every
	// mount of it is nosuid,nodev (ns_linux.go).
	if _, err := run("umoci", "raw", "unpack", "--image", layout+":image", tmp); err != nil {
		return "", fmt.Errorf("%s: unpacking: %v", img, err)
	}
	env, err := layoutEnv(layout, "image")
	if err != nil {
		return "", fmt.Errorf("%s: reading its configuration: %v", img, err)
	}
	b, _ := json.Marshal(env)
	if err := os.WriteFile(rootfs+".env", b, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, rootfs); err != nil {
		return "", err
	}
	return rootfs, nil
}

// digest is the manifest digest img names now (a digest reference names itself).
func (c Cache) digest(img Image) (string, error) {
	if img.Digest != "" {
		return img.Digest, nil
	}
	// --raw: the manifest (or multi-platform index) alone, whose sha256 is its digest. Plain
	// inspect would also fetch the config blob and list every tag.
	args := append([]string{"inspect", "--raw"}, c.tls("--tls-verify", img)...)
	args = append(args, c.creds("--no-creds", img)...)
	out, err := run("skopeo", append(args, img.Transport())...)
	if err != nil {
		return "", fmt.Errorf("%s: %v", img, err)
	}
	sum := sha256.Sum256([]byte(out))
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func (c Cache) tls(flag string, img Image) []string {
	for _, r := range c.Insecure {
		if r == img.Registry {
			return []string{flag + "=false"}
		}
	}
	return nil
}

// creds: registry credentials are not read yet (imagePullSecrets, enroot's netrc: docs/containers.md,
// Not yet); skopeo must not fall back to root's own files on the node either.
func (c Cache) creds(flag string, img Image) []string {
	return []string{flag}
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
	return strings.Join(strings.Fields(msg), " ")
}
