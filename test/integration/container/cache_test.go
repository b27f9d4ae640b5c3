//go:build integration

package container_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sunk.dev/sunk/test/registry"
)

// TestCacheBound: the helper keeps its image cache under --cache-max against real pulls. An
// image whose unpacked size (known only after the pull) does not fit, and one whose manifest
// already says so while the cached image is in use, each fail in one line ("container cache
// full: need X, have Y of Z") and leave the cache as it was; once no container uses the cached
// image, the next pull evicts it.
func TestCacheBound(t *testing.T) {
	dir, helper := helperBed(t)
	addr, _ := registry.Start(t, dir, "127.0.0.1")
	// Three images: busybox alone; with 20 MiB of zeros (a small manifest, a large tree); with
	// 4 MiB of random bytes (a large manifest).
	for name, extra := range map[string][]byte{"small": nil, "zeros": make([]byte, 20<<20), "random": randomBytes(t, 4<<20)} {
		d := filepath.Join(dir, name)
		rootfs := registry.BusyboxRootFS(t, d)
		if extra != nil {
			must(t, os.WriteFile(filepath.Join(rootfs, "data"), extra, 0o644))
		}
		registry.Push(t, filepath.Join(d, "layout"), rootfs, addr+"/test/"+name+":1", nil)
	}

	state, cache := filepath.Join(dir, "state"), filepath.Join(dir, "cache")
	args := func(step, image string, max int64) []string {
		return []string{"--job-id=9", "--step-id=" + step, "--uid=" + uid, "--gid=" + gid,
			"--state-dir=" + state, "--cache-dir=" + cache, "--insecure-registry=" + addr,
			fmt.Sprintf("--cache-max=%d", max), "--container-image=" + addr + "/test/" + image + ":1"}
	}
	var held holders
	t.Cleanup(func() {
		held.release()
		for _, s := range []string{"0", "3"} {
			_ = exec.Command(helper, append([]string{"remove"}, args(s, "small", 0)...)...).Run()
		}
	})
	// cached lists rootfs/ (images and their records) and the directories that must be empty
	// between pulls: a failed pull leaves nothing.
	cached := func() []string {
		t.Helper()
		var out []string
		for _, d := range []string{"rootfs", "oci", "pulls"} {
			entries, err := os.ReadDir(filepath.Join(cache, d))
			must(t, err)
			for _, e := range entries {
				out = append(out, d+"/"+e.Name())
			}
		}
		return out
	}
	oneLine := func(err error, want string) {
		t.Helper()
		if err == nil || !regexp.MustCompile(want).MatchString(err.Error()) || strings.Contains(err.Error(), "\n") {
			t.Errorf("err = %v, want one line matching %q", err, want)
		}
	}

	if _, err := held.prepare(helper, args("0", "small", 0)...); err != nil {
		t.Fatalf("prepare small: %v", err)
	}
	small := cached()
	sizes, _ := filepath.Glob(filepath.Join(cache, "rootfs", "*.size"))
	if len(sizes) != 1 || len(small) != 4 {
		t.Fatalf("after one pull the cache holds %v, want one image with .env, .size, .used", small)
	}
	smallSize, err := strconv.ParseInt(strings.TrimSpace(readFile(t, sizes[0])), 10, 64)
	must(t, err)
	t.Logf("bench: container_cache_small_image_bytes=%d", smallSize)

	// zeros: its manifest fits 10 MiB beside small, its unpacked tree does not.
	var h1 holders
	_, err = h1.prepare(helper, args("1", "zeros", 10<<20)...)
	oneLine(err, `^sunk-container: --container-image: \S+/test/zeros:1: container cache full: need 2\d\.\d MiB, have \d\.\d MiB of 10\.0 MiB$`)
	if got := cached(); !slices.Equal(got, small) {
		t.Errorf("after the failed pull the cache holds %v, want %v", got, small)
	}

	// random: the helper reserves its compressed size three times over (layout and unpacked
	// tree); a bound that fits that, but not beside small, which step 0 still uses.
	bound := 3*compressedSize(t, addr+"/test/random:1") + smallSize/2
	_, err = h1.prepare(helper, args("2", "random", bound)...)
	oneLine(err, `^sunk-container: --container-image: \S+/test/random:1: container cache full: need 1\d\.\d MiB, have 1\d\.\d MiB of 1\d\.\d MiB$`)
	if got := cached(); !slices.Equal(got, small) {
		t.Errorf("after the refused pull the cache holds %v, want %v", got, small)
	}

	// Step 0 ends: small is no longer in use, and random's pull evicts it.
	held.release()
	if out, err := exec.Command(helper, append([]string{"remove"}, args("0", "small", 0)...)...).CombinedOutput(); err != nil {
		t.Fatalf("remove step 0: %v: %s", err, out)
	}
	if _, err := held.prepare(helper, args("3", "random", bound)...); err != nil {
		t.Fatalf("prepare random once small is unused: %v", err)
	}
	got := cached()
	if len(got) != 4 || slices.Contains(got, small[0]) {
		t.Errorf("after evicting small the cache holds %v, want random alone (small was %v)", got, small)
	}
}

// compressedSize is the bytes of ref's config and layers, as its manifest says.
func compressedSize(t *testing.T, ref string) int64 {
	t.Helper()
	out, err := exec.Command("skopeo", "inspect", "--raw", "--tls-verify=false", "docker://"+ref).Output()
	must(t, err)
	var m struct {
		Config struct{ Size int64 }
		Layers []struct{ Size int64 }
	}
	must(t, json.Unmarshal(out, &m))
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	must(t, err)
	return b
}
