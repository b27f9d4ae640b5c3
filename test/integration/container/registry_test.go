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
	"sync"
	"testing"

	"sunk.dev/sunk/internal/container"
	"sunk.dev/sunk/test/registry"
)

// TestPullFromRegistry: sunk-container pulls from a real registry (Debian's docker-registry,
// distribution 2.8) an image the test built (umoci) and pushed (skopeo); two steps asking for
// it at once fetch its layer once; a missing image and a closed registry fail in one line
// naming --container-image.
func TestPullFromRegistry(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("sunk-container needs root (mount namespaces, overlayfs)")
	}
	for _, tool := range []string{"docker-registry", "skopeo", "umoci"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (a host package of hack/provision.sh)", tool)
		}
	}
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	helper := buildHelper(t, dir)
	rootfs := registry.BusyboxRootFS(t, dir)
	addr, accessLog := registry.Start(t, dir, "127.0.0.1")

	registry.Push(t, filepath.Join(dir, "layout"), rootfs, addr+"/test/busybox:1", nil)

	state, cache := filepath.Join(dir, "state"), filepath.Join(dir, "cache")
	args := func(step, image string) []string {
		return []string{"--job-id=9", "--step-id=" + step, "--uid=" + uid, "--gid=" + gid,
			"--state-dir=" + state, "--cache-dir=" + cache, "--insecure-registry=" + addr,
			"--container-image=" + image}
	}
	var held holders
	var mu sync.Mutex
	prepare := func(step, image string) (string, error) {
		var h holders
		ns, err := h.prepare(helper, args(step, image)...)
		mu.Lock()
		held = append(held, h...)
		mu.Unlock()
		return ns, err
	}
	t.Cleanup(func() {
		held.release()
		for _, s := range []string{"0", "1", "2"} {
			if out, err := exec.Command(helper, append([]string{"remove"}, args(s, "x")...)...).CombinedOutput(); err != nil {
				t.Errorf("remove step %s: %v: %s", s, err, out)
			}
		}
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mi), dir) {
			t.Errorf("mounts left under the test's directory:\n%s", grepLines(string(mi), dir))
		}
	})

	// Two steps at once, one in enroot's syntax and one in Docker's: one image.
	var wg sync.WaitGroup
	outs, errs := make([]string, 2), make([]error, 2)
	for i, image := range []string{addr + "#test/busybox:1", addr + "/test/busybox:1"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = prepare(fmt.Sprint(i), image)
		}()
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("prepare step %d: %v", i, errs[i])
		}
		out, _ := exec.Command("nsenter", append(enterArgs(outs[i]), "-S", uid, "-G", gid, "cat", "/etc/os-release")...).CombinedOutput()
		if !strings.Contains(string(out), "sunk test image 1") {
			t.Errorf("step %d: /etc/os-release in the container is %q", i, out)
		}
	}
	// The layer is the largest blob: GETs of each blob, counted in the registry's access log.
	_, counts := registry.Requests(t, accessLog, "test/busybox")
	if len(counts) == 0 {
		t.Fatalf("no blob was fetched, says the registry's log")
	}
	for blob, n := range counts {
		if n != 1 {
			t.Errorf("blob %s fetched %d times by two steps pulling one image, want once", blob, n)
		}
	}

	for i, tc := range []struct{ image, want string }{
		{addr + "#test/nothing:1", "sunk-container: --container-image: " + addr + "/test/nothing:1: "},
		{registry.FreeAddr(t, "127.0.0.1") + "#test/busybox:1", "connection refused"},
	} {
		_, err := prepare(fmt.Sprint(2+i), tc.image)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("prepare %s: err = %v, want one line containing %q", tc.image, err, tc.want)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return string(b)
}

// TestCacheBound: the helper keeps its image cache under --cache-max against real pulls. An
// image whose unpacked size (known only after the pull) does not fit, and one whose manifest
// already says so while the cached image is in use, each fail in one line ("container cache
// full: need X, have Y of Z") and leave the cache as it was; once no container uses the cached
// image, the next pull evicts it.
func TestCacheBound(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("sunk-container needs root (mount namespaces, overlayfs)")
	}
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	helper := buildHelper(t, dir)
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

// TestRegistryCredentials: a registry that wants basic authentication (distribution's
// htpasswd). Without credentials the pull fails in one line; the node's credentials
// (--auth-dir, a dockerconfigjson as the NodeSet's imagePullSecrets are mounted) pull; so do the
// user's own (enroot's ~/.config/enroot/.credentials, read as the user), which come first; a
// cached image is still refused to a step without credentials; and a credentials file that is
// a link to the node's is read as the user, so refused.
func TestRegistryCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("sunk-container needs root (mount namespaces, overlayfs)")
	}
	home := userHome(t, uid)
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o755))
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	helper := buildHelper(t, dir)
	addr, accessLog := registry.StartWith(t, dir, "127.0.0.1", map[string]string{"node": "node-pw", "alice": "alice-pw"})
	registry.PushAs(t, "node:node-pw", filepath.Join(dir, "layout"), registry.BusyboxRootFS(t, dir), addr+"/test/private:1", nil)

	// The node's credentials, root's alone, as the compute pod has them.
	authDir := filepath.Join(dir, "auth")
	must(t, os.MkdirAll(authDir, 0o755))
	must(t, os.WriteFile(filepath.Join(authDir, "00-elsewhere.json"), []byte(`{"auths":{"other.example.com":{"auth":"eDp5"}}}`), 0o400))
	must(t, os.WriteFile(filepath.Join(authDir, "01-node.json"), container.AuthFile(addr, "node", "node-pw"), 0o400))
	nodeAuth := filepath.Join(authDir, "01-node.json")

	// The user's home, private to this test: a mount namespace of the helper's where a
	// directory of the test is at the home directory's path.
	userDir := filepath.Join(dir, "home")
	must(t, os.MkdirAll(filepath.Join(userDir, ".config/enroot"), 0o700))
	must(t, os.Chown(userDir, 1000, 1000))
	must(t, os.Chown(filepath.Join(userDir, ".config"), 1000, 1000))
	must(t, os.Chown(filepath.Join(userDir, ".config/enroot"), 1000, 1000))
	credentials := filepath.Join(userDir, ".config/enroot/.credentials")
	setCredentials := func(text string) {
		t.Helper()
		_ = os.Remove(credentials)
		if text != "" {
			must(t, os.WriteFile(credentials, []byte(text), 0o600))
			must(t, os.Chown(credentials, 1000, 1000))
		}
	}
	wrapper := filepath.Join(dir, "helper-with-home")
	must(t, os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\nexec unshare --mount --propagation private sh -c 'mount --bind %s %s && exec %s \"$@\"' sh \"$@\"\n", userDir, home, helper)), 0o755))

	state, cache := filepath.Join(dir, "state"), filepath.Join(dir, "cache")
	step := 0
	var held holders
	t.Cleanup(func() {
		held.release()
		for s := 0; s < step; s++ {
			_ = exec.Command(helper, "remove", "--job-id=9", fmt.Sprintf("--step-id=%d", s), "--uid="+uid, "--gid="+gid,
				"--state-dir="+state, "--container-image=x").Run()
		}
	})
	prepare := func(image string, nodeCreds bool) error {
		t.Helper()
		args := []string{"--job-id=9", fmt.Sprintf("--step-id=%d", step), "--uid=" + uid, "--gid=" + gid,
			"--state-dir=" + state, "--cache-dir=" + cache, "--insecure-registry=" + addr, "--container-image=" + image}
		step++
		if nodeCreds {
			args = append(args, "--auth-dir="+authDir)
		}
		_, err := held.prepare(wrapper, args...)
		return err
	}
	image := addr + "/test/private:1"
	oneLine := func(what string, err error, want string) {
		t.Helper()
		t.Logf("%s: %v", what, err)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line containing %q", what, err, want)
		}
	}

	oneLine("no credentials", prepare(image, false), "sunk-container: --container-image: "+image+": reading manifest 1 in "+addr+"/test/private: unauthorized: authentication required")
	if err := prepare(image, true); err != nil {
		t.Errorf("the node's credentials: %v", err)
	}
	// Cached now; a step without credentials still may not use it.
	oneLine("no credentials, the image cached", prepare(image, false), "sunk-container: --container-image: "+image+": reading manifest 1 in "+addr+"/test/private: unauthorized: authentication required")

	setCredentials("machine " + addr + " login alice password alice-pw\n")
	if err := prepare(image, false); err != nil {
		t.Errorf("the user's credentials: %v", err)
	}
	if err := prepare("alice@"+addr+"#test/private:1", false); err != nil {
		t.Errorf("the user's credentials, USER@: %v", err)
	}
	oneLine("USER@ without an entry", prepare("bob@"+addr+"#test/private:1", true), `no credentials of login "bob" for `+addr)
	// The user's come first, even wrong where the node's would do.
	setCredentials("machine " + addr + " login alice password wrong\n")
	oneLine("the user's wrong password", prepare(image, true), "sunk-container: --container-image: "+image+": reading manifest 1 in "+addr+"/test/private: unauthorized: authentication required")
	// A link to the node's credentials is opened as the user: refused.
	_ = os.Remove(credentials)
	must(t, os.Symlink(nodeAuth, credentials))
	oneLine("credentials linked to the node's", prepare(image, true), "permission denied")

	manifests, _ := registry.Requests(t, accessLog, "test/private")
	t.Logf("bench: container_auth_manifest_gets=%d", manifests)
	if _, err := os.ReadDir(filepath.Join(cache, "auth")); err == nil {
		if left, _ := os.ReadDir(filepath.Join(cache, "auth")); len(left) > 0 {
			t.Errorf("the user's credentials were left in the cache: %v", left)
		}
	}
}

// userHome is the home directory the node gives uid (getent), which the test covers with a
// directory of its own in the helper's mount namespace.
func userHome(t *testing.T, uid string) string {
	out, err := exec.Command("getent", "passwd", uid).Output()
	f := strings.Split(strings.TrimSpace(string(out)), ":")
	if err != nil || len(f) < 6 || !filepath.IsAbs(f[5]) || f[5] == "/" {
		t.Fatalf("uid %s needs a home directory on this machine (getent passwd: %q, %v)", uid, out, err)
	}
	if _, err := os.Stat(f[5]); err != nil {
		t.Fatalf("uid %s's home directory %s: %v (the test mounts over it)", uid, f[5], err)
	}
	return f[5]
}
