// Package registry gives tests of containers for jobs a real image registry and images built
// offline: Debian's docker-registry (distribution) on a free port, and a small busybox image
// laid out with umoci and pushed with skopeo (host packages of hack/provision.sh).
package registry

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"sunk.dev/sunk/test/testenv"
	"sunk.dev/sunk/test/wait"
)

// Start runs docker-registry on a free port of host, storage and access log under dir, until
// the test ends; it returns the registry's address and its access log.
func Start(tb testing.TB, dir, host string) (addr, accessLog string) {
	return StartWith(tb, dir, host, nil)
}

// StartWith is Start with basic authentication when users is not empty (USER: PASSWORD, in an
// htpasswd file of bcrypt hashes, the one format distribution reads): every request, pulls
// included, then needs one of them.
func StartWith(tb testing.TB, dir, host string, users map[string]string) (addr, accessLog string) {
	tb.Helper()
	if _, err := exec.LookPath("docker-registry"); err != nil {
		tb.Fatal("docker-registry is needed (a host package of hack/provision.sh)")
	}
	must(tb, os.MkdirAll(dir, 0o755))
	addr = testenv.FreeAddr(tb, host)
	conf := fmt.Sprintf("version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "registry"), addr)
	if len(users) > 0 {
		var htpasswd strings.Builder
		for u, p := range users {
			h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
			must(tb, err)
			fmt.Fprintf(&htpasswd, "%s:%s\n", u, h)
		}
		file := filepath.Join(dir, "htpasswd")
		must(tb, os.WriteFile(file, []byte(htpasswd.String()), 0o600))
		conf += fmt.Sprintf("auth:\n  htpasswd:\n    realm: sunk-test\n    path: %s\n", file)
	}
	confFile := filepath.Join(dir, "registry.yml")
	must(tb, os.WriteFile(confFile, []byte(conf), 0o644))
	accessLog = filepath.Join(dir, "registry.log")
	testenv.StartLogged(tb, exec.Command("docker-registry", "serve", confFile), accessLog)
	wait.For(tb, "the registry answers /v2/", 30*time.Second, 100*time.Millisecond, func() error {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		// 401: it answers, and wants credentials.
		if resp.StatusCode != http.StatusOK && !(len(users) > 0 && resp.StatusCode == http.StatusUnauthorized) {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	return addr, accessLog
}

// Requests counts the registry's answered requests for repo (NAME) in its access log: manifest
// GETs and blob GETs (each blob's count by digest).
func Requests(tb testing.TB, accessLog, repo string) (manifests int, blobs map[string]int) {
	tb.Helper()
	b, err := os.ReadFile(accessLog)
	must(tb, err)
	manifestGet := regexp.MustCompile(`"GET /v2/` + regexp.QuoteMeta(repo) + `/manifests/\S+ HTTP/[0-9.]+" 200 `)
	blobGet := regexp.MustCompile(`"GET /v2/` + regexp.QuoteMeta(repo) + `/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" 200 `)
	manifests = len(manifestGet.FindAllIndex(b, -1))
	blobs = map[string]int{}
	for _, m := range blobGet.FindAllSubmatch(b, -1) {
		blobs[string(m[1])]++
	}
	return manifests, blobs
}

// BusyboxRootFS writes a small root filesystem under dir (dir/rootfs): busybox, a setuid-root
// program that prints its effective uid, an os-release that names it ("sunk test image 1"), a
// passwd with root alone, a world-writable /scratch.
func BusyboxRootFS(tb testing.TB, dir string) string {
	tb.Helper()
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		tb.Fatal("busybox (Debian busybox-static, a host package of hack/provision.sh) is needed to build the test image")
	}
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "etc", "proc", "sys", "dev", "tmp", "scratch"} {
		must(tb, os.MkdirAll(filepath.Join(rootfs, d), 0o755))
	}
	// /scratch: a directory every user may write (as /tmp in an image), where a step of a
	// named container leaves a file for the next (/tmp is private to each step).
	must(tb, os.Chmod(filepath.Join(rootfs, "scratch"), 0o777|os.ModeSticky))
	data, err := os.ReadFile(busybox)
	must(tb, err)
	must(tb, os.WriteFile(filepath.Join(rootfs, "bin/busybox"), data, 0o755))
	for _, a := range []string{"sh", "cat", "id", "touch", "grep"} {
		must(tb, os.Symlink("busybox", filepath.Join(rootfs, "bin", a)))
	}
	// A setuid-root program that prints its effective uid (busybox's applets drop setuid
	// themselves, so they cannot show it): inside the container it must run as the user.
	src := filepath.Join(dir, "euid.c")
	must(tb, os.WriteFile(src, []byte("#include <stdio.h>\n#include <unistd.h>\nint main(void){printf(\"euid=%d\\n\",(int)geteuid());return 0;}\n"), 0o644))
	if out, err := exec.Command("cc", "-static", "-o", filepath.Join(rootfs, "bin/euid"), src).CombinedOutput(); err != nil {
		tb.Fatalf("cc -static: %v\n%s", err, out)
	}
	// os.ModeSetuid, not 0o4000: Go's FileMode keeps the setuid bit elsewhere.
	must(tb, os.Chmod(filepath.Join(rootfs, "bin/euid"), 0o755|os.ModeSetuid))
	must(tb, os.WriteFile(filepath.Join(rootfs, "etc/os-release"), []byte("PRETTY_NAME=\"sunk test image 1\"\n"), 0o644))
	must(tb, os.WriteFile(filepath.Join(rootfs, "etc/passwd"), []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644))
	return rootfs
}

// Push makes an image of rootfs (umoci, an OCI layout in layout) with env as its configuration's
// Env, and pushes it to ref (REGISTRY/NAME:TAG, plain HTTP) with skopeo, run behind prefix
// (for example nsenter into a network namespace) when given.
func Push(tb testing.TB, layout, rootfs, ref string, env []string, prefix ...string) {
	tb.Helper()
	PushAs(tb, "", layout, rootfs, ref, env, prefix...)
}

// PushAs is Push with credentials (USER:PASSWORD) for a registry that wants them.
func PushAs(tb testing.TB, creds, layout, rootfs, ref string, env []string, prefix ...string) {
	tb.Helper()
	var config []string
	for _, e := range env {
		config = append(config, "--config.env="+e)
	}
	PushConfig(tb, creds, layout, rootfs, ref, config, prefix...)
}

// PushConfig is PushAs with the image's configuration as umoci config's flags
// (--config.env=..., --config.entrypoint=...).
func PushConfig(tb testing.TB, creds, layout, rootfs, ref string, config []string, prefix ...string) {
	tb.Helper()
	dest := []string{"--dest-tls-verify=false"}
	if creds != "" {
		dest = append(dest, "--dest-creds="+creds)
	}
	cmds := [][]string{
		{"umoci", "init", "--layout", layout},
		{"umoci", "new", "--image", layout + ":1"},
		{"umoci", "insert", "--image", layout + ":1", rootfs, "/"},
	}
	if len(config) > 0 {
		cmds = append(cmds, append([]string{"umoci", "config", "--image", layout + ":1"}, config...))
	}
	push := append(append(append(append([]string{}, prefix...), "skopeo", "copy"), dest...), "oci:"+layout+":1", "docker://"+ref)
	cmds = append(cmds, push)
	for _, args := range cmds {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			tb.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
