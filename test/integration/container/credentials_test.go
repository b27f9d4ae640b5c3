//go:build integration

package container_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sunk.dev/sunk/internal/container"
	"sunk.dev/sunk/test/registry"
)

// TestRegistryCredentials: a registry that wants basic authentication (distribution's
// htpasswd). Without credentials the pull fails in one line; the node's credentials
// (--auth-dir, a dockerconfigjson as the NodeSet's imagePullSecrets are mounted) pull; so do the
// user's own (enroot's ~/.config/enroot/.credentials, read as the user), which come first; a
// cached image is still refused to a step without credentials; and a credentials file that is
// a link to the node's is read as the user, so refused.
func TestRegistryCredentials(t *testing.T) {
	dir, helper := helperBed(t)
	home := userHome(t, uid)
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
