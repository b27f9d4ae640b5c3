package container

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The cache's bookkeeping for its bound (evict.go), beside Cache's layout:
//
//	DIR/rootfs/HEX.size  bytes the unpacked image takes on disk, measured once
//	DIR/rootfs/HEX.used  its mtime is when a step last took the image (least recently used goes first)
//	DIR/pulls/HEX        a pull in progress: the bytes it reserved before pulling
//	DIR/locks/cache      every reference, reservation and eviction happens under this lock
//
// An image is in use while a container's directory (STATE/JOB/NAME) has a usesFile naming it:
// written under the cache lock before the step's container is made, gone with the directory
// (the reaper, the job's epilog, a failed prepare). So an eviction, which also runs under the
// lock, never deletes an image a step is about to mount or has mounted.

// usesFile, in a container's directory, names the cached image (rootfs/HEX) it sits on.
const usesFile = "uses"

// unpackFactor guesses an image's unpacked size from its compressed layers' before the pull,
// when only the manifest is known (gzip'd file systems shrink to a third to a half); after the
// pull the measured size decides.
const unpackFactor = 2

// cacheState is what the eviction decision needs, read under the cache lock.
type cacheState struct {
	images  []CachedImage
	pending int64
}

// state lists the cache's images (size, last use, in use) and the bytes reserved by pulls
// in progress other than except's (a digest's hex). It fails closed: an image whose use
// cannot be told is in use.
func (c Cache) state(except string) (cacheState, error) {
	uses, err := imagesInUse(c.StateDir)
	if err != nil {
		return cacheState{}, err
	}
	var s cacheState
	entries, err := os.ReadDir(filepath.Join(c.Dir, "rootfs"))
	if err != nil {
		return cacheState{}, err
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !digestRE.MatchString("sha256:"+name) {
			if strings.HasSuffix(name, ".evicting") {
				_ = os.RemoveAll(filepath.Join(c.Dir, "rootfs", name)) // an eviction that died half way
			}
			continue
		}
		rootfs := filepath.Join(c.Dir, "rootfs", name)
		size, err := c.imageSize(rootfs)
		if err != nil {
			return cacheState{}, err
		}
		im := CachedImage{Digest: name, Size: size, InUse: uses[rootfs]}
		if fi, err := os.Stat(rootfs + ".used"); err == nil {
			im.LastUsed = fi.ModTime()
		}
		s.images = append(s.images, im)
	}
	pulls, err := os.ReadDir(filepath.Join(c.Dir, "pulls"))
	if err != nil {
		return cacheState{}, err
	}
	for _, p := range pulls {
		if p.Name() == except {
			continue
		}
		if !c.pulling(p.Name()) {
			// A pull that died (its step was cancelled, the node restarted): its leftovers go.
			c.dropPull(p.Name())
			continue
		}
		b, err := os.ReadFile(filepath.Join(c.Dir, "pulls", p.Name()))
		if err != nil {
			return cacheState{}, err
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		s.pending += n
	}
	return s, nil
}

// pulling says whether a helper holds the digest's lock (Unpacked holds it while it pulls).
func (c Cache) pulling(sum string) bool {
	f, err := os.OpenFile(filepath.Join(c.Dir, "locks", "digest-"+sum), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return true
	}
	return false // closing f releases the lock just taken
}

// dropPull removes a pull's reservation and what it left (its layout, its half-unpacked tree).
func (c Cache) dropPull(sum string) {
	_ = os.RemoveAll(filepath.Join(c.Dir, "oci", sum))
	_ = os.RemoveAll(filepath.Join(c.Dir, "rootfs", sum+".tmp"))
	_ = os.Remove(filepath.Join(c.Dir, "pulls", sum))
}

// reserve records a pull's estimate (state counts it for other pulls).
func (c Cache) reserve(sum string, n int64) error {
	return os.WriteFile(filepath.Join(c.Dir, "pulls", sum), []byte(strconv.FormatInt(n, 10)), 0o600)
}

// imageSize is rootfs's recorded size, measured and recorded when missing.
func (c Cache) imageSize(rootfs string) (int64, error) {
	if b, err := os.ReadFile(rootfs + ".size"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n, nil
		}
	}
	n, err := diskUsage(rootfs)
	if err != nil {
		return 0, err
	}
	return n, os.WriteFile(rootfs+".size", []byte(strconv.FormatInt(n, 10)), 0o600)
}

// evict deletes images: first renamed (a half-deleted tree is never taken for an image), then
// removed with their records.
func (c Cache) evict(victims []string) error {
	for _, sum := range victims {
		rootfs := filepath.Join(c.Dir, "rootfs", sum)
		gone := rootfs + ".evicting"
		if err := os.Rename(rootfs, gone); err != nil {
			return err
		}
		for _, f := range []string{".env", entrypointExt, ".size", ".used"} {
			_ = os.Remove(rootfs + f)
		}
		if err := os.RemoveAll(gone); err != nil {
			return err
		}
	}
	return nil
}

// use records that the container at dir sits on rootfs, and that rootfs was used now.
func use(dir, rootfs string) error {
	if err := os.WriteFile(filepath.Join(dir, usesFile), []byte(rootfs), 0o644); err != nil {
		return err
	}
	now := time.Now()
	if err := os.Chtimes(rootfs+".used", now, now); errors.Is(err, os.ErrNotExist) {
		return os.WriteFile(rootfs+".used", nil, 0o600)
	} else {
		return err
	}
}

// imagesInUse are the images named by the usesFile of every container under stateDir
// (STATE/JOB/NAME/uses).
func imagesInUse(stateDir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(stateDir, "*", "*", usesFile))
	if err != nil {
		return nil, err
	}
	uses := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since the listing: no longer in use
		}
		if err != nil {
			return nil, err
		}
		uses[string(b)] = true
	}
	return uses, nil
}

// diskUsage is what the tree at root takes on disk (blocks, each hard-linked file once), as
// kubelet measures an emptyDir.
func diskUsage(root string) (int64, error) {
	seen := map[uint64]bool{}
	var n int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			n += fi.Size()
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		n += st.Blocks * 512
		return nil
	})
	return n, err
}

// manifestSize is the bytes of an image manifest's config and layers (compressed); 0 for an
// index, whose platform's manifest is known only once skopeo chose it.
func manifestSize(raw []byte) int64 {
	var m struct {
		Config struct{ Size int64 }   `json:"config"`
		Layers []struct{ Size int64 } `json:"layers"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return 0
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}
