//go:build integration

package container_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sunk.dev/sunk/test/registry"
	"sunk.dev/sunk/test/testenv"
)

// TestPullFromRegistry: sunk-container pulls from a real registry (Debian's docker-registry,
// distribution 2.8) an image the test built (umoci) and pushed (skopeo); two steps asking for
// it at once fetch its layer once; a missing image and a closed registry fail in one line
// naming --container-image.
func TestPullFromRegistry(t *testing.T) {
	dir, helper := helperBed(t)
	for _, tool := range []string{"docker-registry", "skopeo", "umoci"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (a host package of hack/provision.sh)", tool)
		}
	}
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
		for _, s := range []string{"0", "1", "2", "3", "4"} {
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

	// A digest reference (the registry's Docker-Content-Digest) is the cached image; the helper
	// checks it against the manifest the registry serves.
	req, _ := http.NewRequest(http.MethodHead, "http://"+addr+"/v2/test/busybox/manifests/1", nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	digest := resp.Header.Get("Docker-Content-Digest")
	if _, err := prepare("4", addr+"/test/busybox@"+digest); err != nil {
		t.Errorf("prepare by digest %s: %v", digest, err)
	}
	if got, _ := filepath.Glob(filepath.Join(cache, "rootfs", "*.env")); len(got) != 1 || !strings.HasPrefix(filepath.Base(got[0]), strings.TrimPrefix(digest, "sha256:")) {
		t.Errorf("the cache holds %v, want the one image %s", got, digest)
	}

	for i, tc := range []struct{ image, want string }{
		{addr + "#test/nothing:1", "sunk-container: --container-image: " + addr + "/test/nothing:1: "},
		{testenv.FreeAddr(t, "127.0.0.1") + "#test/busybox:1", "connection refused"},
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
