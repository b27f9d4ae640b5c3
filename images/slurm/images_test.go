// Package slurmimage holds no code: its tests keep the one build of the Slurm image
// (hack/provision.sh rootfs + hack/images.sh, which `make images` and the test bed run) reading
// its inputs, and check the runtime scripts of rootfs/ (docs/images.md).
package slurmimage

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// packagesTxt parses packages.txt the way its header says: one name a line, '#' comments.
func packagesTxt(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	sc := bufio.NewScanner(strings.NewReader(read(t, "packages.txt")))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		pkgs = append(pkgs, strings.Fields(line)...)
	}
	return pkgs
}

// Both builds install the output of packages.sh; it must be exactly the list of packages.txt.
func TestPackagesShPrintsPackagesTxt(t *testing.T) {
	out, err := exec.Command("sh", "packages.sh", "packages.txt").Output()
	if err != nil {
		t.Fatalf("packages.sh: %v", err)
	}
	got, want := strings.Fields(string(out)), packagesTxt(t)
	if !slices.Equal(got, want) {
		t.Fatalf("packages.sh prints %q, packages.txt lists %q", got, want)
	}
	for _, p := range []string{"slurmctld", "slurmd", "slurmrestd", "slurmdbd", "sackd", "slurm-client",
		"slurm-wlm-jwt-plugin", "liblua5.1-0", "s6", "openssh-server", "sssd-ldap", "libnss-sss", "libpam-sss",
		"mariadb-server-core", "mariadb-client-core", "util-linux", "hostname", "iproute2", "curl"} {
		if !slices.Contains(want, p) {
			t.Errorf("packages.txt lacks %s, which sunk-entrypoint or sunk-ready needs", p)
		}
	}
}

// The build reads packages.txt through packages.sh, runs rootfs-setup.sh, puts the helper, the
// SPANK plugin and the TLS terminator where the rendered pods expect them, and starts
// sunk-entrypoint; each release from the suite hack/lib.sh names.
func TestOfflineBuildReadsTheImageInputs(t *testing.T) {
	lib := read(t, filepath.Join("..", "..", "hack", "lib.sh"))
	for _, want := range []string{"24.11) SLURM_SUITE=trixie ", "26.05) SLURM_SUITE=sid "} {
		if !strings.Contains(lib, want) {
			t.Errorf("hack/lib.sh does not say %q", want)
		}
	}
	prov := read(t, filepath.Join("..", "..", "hack", "provision.sh"))
	for _, want := range []string{`"$d/packages.sh"`, `--customize-hook="$d/rootfs-setup.sh`, "packages.txt,packages.sh,rootfs-setup.sh",
		`"$SUNK_ROOT/images/slurm/packages.sh" "$SUNK_ROOT/images/slurm/packages-containers.txt"`, "--no-install-recommends"} {
		if !strings.Contains(prov, want) {
			t.Errorf("hack/provision.sh (rootfs and image_containers steps) does not contain %q", want)
		}
	}
	img := read(t, filepath.Join("..", "..", "hack", "images.sh"))
	for _, want := range []string{
		`"$m:$3"`, `pack "$ctr:$base" "$mk"`, `"$SUNK_ROOT/images/slurm/rootfs:$SUNK_CACHE/build/slurm-containers$sfx:$SUNK_CACHE/layers/slurm-bin$sfx"`,
		`'["/usr/local/sbin/sunk-entrypoint"]'`,
		`CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$out.tmp" ./cmd/sunk-container`,
		`SLURM_INCLUDE="$include"`, `"$out.tmp/usr/local/lib/sunk/spank"`, `"$out.tmp/usr/local/bin/"`,
		`-o "$d.tmp/usr/local/bin/sunk-tlsproxy" ./cmd/sunk-tlsproxy`,
	} {
		if !strings.Contains(img, want) {
			t.Errorf("hack/images.sh (slurm image) does not contain %q", want)
		}
	}
}

// packages-containers.txt is read the same way, and holds what sunk-container runs.
func TestContainersPackages(t *testing.T) {
	out, err := exec.Command("sh", "packages.sh", "packages-containers.txt").Output()
	if err != nil {
		t.Fatalf("packages.sh packages-containers.txt: %v", err)
	}
	got := strings.Fields(string(out))
	for _, p := range []string{"skopeo", "umoci"} {
		if !slices.Contains(got, p) {
			t.Errorf("packages-containers.txt lacks %s, which sunk-container runs", p)
		}
	}
	for _, p := range got {
		if slices.Contains(packagesTxt(t), p) {
			t.Errorf("%s is in both packages.txt and packages-containers.txt", p)
		}
	}
}

// Every script of the image is executable, parses, and passes shellcheck when it is installed.
func TestScripts(t *testing.T) {
	scripts := []string{"packages.sh", "rootfs-setup.sh"}
	err := filepath.WalkDir("rootfs", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(read(t, path), "#!/bin/sh") {
			scripts = append(scripts, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rootfs/usr/local/sbin/sunk-entrypoint", "rootfs/usr/local/bin/sunk-ready", "rootfs/usr/local/lib/sunk/s6-svscan-finish"} {
		if !slices.Contains(scripts, want) {
			t.Errorf("%s is missing or not a #!/bin/sh script", want)
		}
	}
	shellcheck, _ := exec.LookPath("shellcheck")
	for _, s := range scripts {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable", s)
		}
		if out, err := exec.Command("sh", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", s, err, out)
		}
		if shellcheck != "" {
			if out, err := exec.Command(shellcheck, "-s", "sh", s).CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", s, err, out)
			}
		}
	}
}

// sunk-entrypoint and sunk-ready know the same roles, and the docs describe each of them.
func TestRolesAgree(t *testing.T) {
	usage := regexp.MustCompile(`sunk-(?:entrypoint|ready) ([a-z|-]+)`)
	roles := func(path string) string {
		m := usage.FindStringSubmatch(read(t, path))
		if m == nil {
			t.Fatalf("%s: no usage line", path)
		}
		return m[1]
	}
	entry, ready := roles("rootfs/usr/local/sbin/sunk-entrypoint"), roles("rootfs/usr/local/bin/sunk-ready")
	if entry != ready {
		t.Fatalf("sunk-entrypoint knows %s, sunk-ready %s", entry, ready)
	}
	docs := read(t, filepath.Join("..", "..", "docs", "images.md"))
	for _, role := range strings.Split(entry, "|") {
		if !strings.Contains(docs, "`"+role+"`") {
			t.Errorf("docs/images.md does not describe the role %s", role)
		}
	}
}
