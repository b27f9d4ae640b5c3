//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/testenv"
)

// The pages whose commands the journey runs.
const (
	userGuide = "docs/user-guide.md"
	backupDoc = "docs/backup.md"
)

// journeyTag is the docs' TAG in the journey: §1's `make images` pushes the images under it to a
// repository of the local cluster's registry, and every pod of the journey pulls them from there.
const journeyTag = "e2e"

// TestHelmJourney is the user guide (docs/user-guide.md), run as written on the local cluster:
// the commands of §2 (install sunk), §3 (a Slurm cluster and a first job), §7 (upgrading sunk
// and the Slurm release), backup.md's backup, and §8 (uninstalling) are read from the Markdown
// and run with bash (docSection, docRun). Around them the test checks what the page promises:
// the job's output is on the shared volume, seen from a plain pod; a cordon drains the Slurm node
// with a `k8s:` reason (the syncer); a job runs across both upgrades, a held one stays queued,
// the partition's new time limit reaches slurmctld without a restart and the webhook keeps its
// certificate; bad specs are refused by the live webhook and Slurm's own check
// (operator.slurmConfigCheck) while a job runs on; the backup holds the values, the objects,
// the keys and slurmctld's state; `kubectl wait --for=delete` returns only after a running job
// has ended; and the uninstall leaves nothing behind; then backup.md's restore brings the
// cluster back with its keys and its queue.
//
// The commands run as written but for names (docRun): the test runs beside other checkouts'
// tests on the same Kubernetes cluster, so `research` (namespace, release, SlurmCluster) is
// the test's namespace, sunk's `sunk-system` and release `sunk` are the test's, and the sunk
// install also gets `watchNamespaces` (this operator keeps to the test's namespace) and
// `operator.slurmConfigCheck=true` (the bad specs need it). REGISTRY, which the reader exports,
// is a repository of the local cluster's registry (plain HTTP, REGISTRY_TLS_VERIFY=false), so
// §1's `make images` pushes there and the nodes pull from there as a user's do; the restore
// pod's busybox is the local cluster's.
func TestHelmJourney(t *testing.T) {
	h := newHelmEnv(t)
	h.slurmRelease = h.ns // `research` is the namespace and the release
	backup := filepath.Join(t.TempDir(), "backup")
	run := h.docRun(backup, h.Registry(t)+"/"+h.ns)

	run.run(t, docSection(t, userGuide, "## 1. Images")...)
	run.run(t, docSection(t, userGuide, "## 2. Install sunk")...)
	h.webhookAnswers(t)
	run.run(t, docSection(t, userGuide, "## 3. A Slurm cluster and a first job")...)
	login := h.podOf(t, h.slurmRelease, wellknown.ComponentLogin).Name
	// The chart's default release (slurmVersion 26.05, the operator's image of it).
	if v := strings.TrimSpace(h.mustSh(t, login, "sinfo --version")); !sinfoSays2605(v) {
		t.Errorf("sinfo --version in the login pod: %q, want the chart's default 26.05", v)
	}
	// A plain pod on the shared claim reads the first job's output; it holds the claim until
	// the namespace goes, so that the uninstall's job leaves its end there for the test to read.
	shared := h.slurmRelease + "-shared"
	holder := busyboxPod("holder", "exec sleep 3600")
	mountClaims(holder, shared)
	if _, err := h.Clientset.CoreV1().Pods(h.ns).Create(context.Background(), holder, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, h.Clientset, h.ns, "holder", 2*time.Minute, podReady)
	readShared := func(file string) string {
		out, err := h.sh(t, "holder", "c", "cat /"+shared+"/"+file)
		if err != nil {
			t.Fatalf("reading %s from the shared volume in a plain pod: %v\n%s", file, err, out)
		}
		return out
	}
	if out := readShared("scratch/hello-*.out"); !strings.Contains(out, "compute-0") || !strings.Contains(out, "compute-2") {
		t.Errorf("the first job's output, read by a plain pod from the shared volume: %q, want compute-0..2", out)
	}

	h.cordonDrains(t, login)

	held := h.upgrades(t, run, login)

	h.badSpecsChangeNothing(t, login)

	run.run(t, docSection(t, backupDoc, "## Backing up")...)
	keys := h.backupHolds(t, backup)

	h.uninstallWaitsForAJob(t, run, login, readShared)

	h.restores(t, run, keys, held)
}

// docRun runs the docs' commands against the test's releases (TestHelmJourney); backup is
// BACKUP, the directory backup.md writes into, and registry REGISTRY.
func (h *helmEnv) docRun(backup, registry string) docRun {
	word := func(w string) *regexp.Regexp { return regexp.MustCompile(`\b` + regexp.QuoteMeta(w) + `\b`) }
	return docRun{
		env: []string{
			"KUBECONFIG=" + h.Kubeconfig,
			"PATH=" + filepath.Join(testenv.CacheDir(), "bin") + ":" + os.Getenv("PATH"),
			"REGISTRY=" + registry, "TAG=" + journeyTag, "REGISTRY_TLS_VERIFY=false", "BACKUP=" + backup,
		},
		names: []docName{
			{word("research"), h.ns},
			{word("sunk-system"), h.sunkNS},
			{regexp.MustCompile(`\b(helm (?:install|upgrade|uninstall|get values)) sunk\b`), "${1} " + h.sunkRelease},
			// The local cluster's busybox: backup.md's restore pod names a release of Docker Hub's.
			{regexp.MustCompile(`docker\.io/library/busybox:1\.37\b`), busyboxImage},
			{regexp.MustCompile(`\b(helm install \S+ charts/sunk)\b`),
				"${1} --set 'watchNamespaces={" + h.ns + "}' --set operator.slurmConfigCheck=true"},
		},
	}
}

// webhookAnswers makes the Slurm cluster's namespace (§3's --create-namespace then finds it)
// and waits until the operator's webhook answers there through its Service. helm's --wait
// returns once the operator's pods are Ready, webhook server included, but the Service's
// address reaches them only once kube-proxy has caught up: on the local cluster a SlurmCluster
// created at once was refused with "failed calling webhook ... connection refused". A user
// would run the install again (user-guide.md §9); the test waits for what the user waited for.
func (h *helmEnv) webhookAnswers(t *testing.T) {
	t.Helper()
	if err := h.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}); err != nil {
		t.Fatal(err)
	}
	h.webhookServes(t)
}

// webhookServes waits until the operator's webhook answers in the Slurm cluster's namespace
// through its Service (webhookAnswers).
func (h *helmEnv) webhookServes(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	poll(t, time.Minute, "the webhook answering through its Service", func() error {
		probe := &sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "webhook-probe"}}
		if err := h.c.Create(ctx, probe, client.DryRunAll); err != nil && strings.Contains(err.Error(), "failed calling webhook") {
			return err
		}
		return nil
	})
	t.Logf("the webhook answered %s after helm install returned", time.Since(start).Round(100*time.Millisecond))
}

// upgrades runs §7 with a job running and a held one queued: after both upgrades the running
// job ran on (or ended with exit 0), the held one is still queued, the partition's new time
// limit is in slurmctld, which was not restarted, and the webhook kept its certificate with
// the caBundle still naming the CA that signed it (Helm looked the Secret up). It returns the
// held job, which stays queued through the backup.
func (h *helmEnv) upgrades(t *testing.T, run docRun, login string) (held string) {
	t.Helper()
	ctx := context.Background()
	webhook := h.sunkRelease + "-operator"
	secret := func() *corev1.Secret {
		s, err := h.Clientset.CoreV1().Secrets(h.sunkNS).Get(ctx, webhook+"-webhook-tls", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	certBefore := secret()
	running := strings.TrimSpace(h.mustSh(t, login, testenv.AsUser("sbatch --parsable -J across-upgrades --wrap 'sleep 45'")))
	held = strings.TrimSpace(h.mustSh(t, login, testenv.AsUser("sbatch --parsable --hold -J held --wrap true")))
	poll(t, 2*time.Minute, "job "+running+" running", func() error { return h.jobIs(t, login, running, "RUNNING") })
	ctld := h.podOf(t, h.slurmRelease, wellknown.ComponentController)

	run.run(t, docSection(t, userGuide, "## 7. Upgrading")...)

	out := h.mustSh(t, login, "scontrol -o show job "+running)
	if !strings.Contains(out, "JobState=RUNNING") && !(strings.Contains(out, "JobState=COMPLETED") && strings.Contains(out, "ExitCode=0:0")) {
		t.Errorf("job %s, running before the upgrades: %q, want RUNNING or COMPLETED with exit 0", running, out)
	}
	if err := h.jobIs(t, login, held, "PENDING"); err != nil {
		t.Errorf("held job after the upgrades: %v", err)
	}
	poll(t, 3*time.Minute, "MaxTime in slurmctld", func() error {
		out, err := h.sh(t, login, "login", "scontrol -o show partition main")
		if err != nil || !strings.Contains(out, "MaxTime=01:30:00") {
			return fmt.Errorf("scontrol: %v %q", err, out)
		}
		return nil
	})
	h.sameController(t, ctld)
	certAfter := secret()
	if !bytes.Equal(certBefore.Data["tls.crt"], certAfter.Data["tls.crt"]) || !bytes.Equal(certBefore.Data["ca.crt"], certAfter.Data["ca.crt"]) {
		t.Errorf("helm upgrade replaced the webhook certificate")
	}
	vwc, err := h.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, webhook, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, certAfter.Data["ca.crt"]) {
		t.Errorf("after the upgrade the caBundle is not the Secret's CA")
	}
	return held
}

// backupHolds checks what backup.md's commands wrote: both releases' values as they are now,
// the SlurmCluster and its NodeSet, the live keys as manifests, and slurmctld's saved state. It
// returns the backed-up key Secrets by name.
func (h *helmEnv) backupHolds(t *testing.T, dir string) map[string]corev1.Secret {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for file, want := range map[string][]string{
		"slurm-values.yaml": {"1:30:00"},
		"sunk-values.yaml":  {"slurmConfigCheck: true", h.ns},
		"objects.yaml":      {"kind: SlurmCluster", "kind: NodeSet", "name: " + h.slurmRelease},
	} {
		got := read(file)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("backup %s lacks %q:\n%s", file, w, got)
			}
		}
	}
	// The Secrets as restore applies them: whole manifests, with the live keys.
	backedUp := map[string]corev1.Secret{}
	for _, doc := range strings.Split(read("secrets.yaml"), "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var s corev1.Secret
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil || s.Kind != "Secret" || s.Name == "" {
			t.Fatalf("backup secrets.yaml: a manifest that is not a Secret (%v):\n%s", err, doc)
		}
		backedUp[s.Name] = s
	}
	n := clusternames.For(h.cluster(t, h.slurmRelease), "")
	for name, key := range map[string]string{n.AuthSecret: render.AuthKeyName, n.JWTSecret: wellknown.SecretJWTKey, n.SSHHostKeySecret: render.SSHHostKeyName} {
		live, err := h.Clientset.CoreV1().Secrets(h.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := backedUp[name].Data[key]; len(got) == 0 || !bytes.Equal(got, live.Data[key]) {
			t.Errorf("backup secrets.yaml: Secret %s's %s is not the live one (%d bytes)", name, key, len(got))
		}
	}
	f, err := os.Open(filepath.Join(dir, "slurmctld-state.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var files []string
	for {
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("slurmctld-state.tar: %v", err)
		}
		files = append(files, hd.Name)
		if hd.Name == "./job_state" && hd.Size > 0 {
			return backedUp
		}
	}
	t.Errorf("slurmctld-state.tar holds no job_state: %v", files)
	return backedUp
}

// restores runs backup.md's Restoring after the uninstall (the database's step aside: the
// journey has no accounting): the restored cluster holds the backed-up keys, adopted rather
// than generated again, and slurmctld knows the job that was held in the queue at the backup.
func (h *helmEnv) restores(t *testing.T, run docRun, keys map[string]corev1.Secret, held string) {
	t.Helper()
	blocks := docSection(t, backupDoc, "## Restoring")
	if len(blocks) != 5 {
		t.Fatalf("%s Restoring: %d sh blocks, want 5: sunk, the keys, the state, the release, the database", backupDoc, len(blocks))
	}
	start := time.Now()
	run.run(t, blocks[:2]...)
	// The namespace exists now (step 2): wait for the new operator's webhook as §2 does.
	h.webhookServes(t)
	run.run(t, blocks[2:]...)
	t.Logf("restore: %s from sunk's install to the SlurmCluster Ready", time.Since(start).Round(time.Second))
	for name, backedUp := range keys {
		live, err := h.Clientset.CoreV1().Secrets(h.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for key, want := range backedUp.Data {
			if !bytes.Equal(live.Data[key], want) {
				t.Errorf("restored Secret %s: %s is not the backed-up one", name, key)
			}
		}
	}
	login := h.podOf(t, h.slurmRelease, wellknown.ComponentLogin).Name
	poll(t, 2*time.Minute, "the held job "+held+" back in the restored queue", func() error {
		return h.jobIs(t, login, held, "PENDING")
	})
	// The jobs that ran when the backup was taken are back RUNNING on compute pods that never
	// heard of them, until a registration of their node finds them missing (backup.md): the
	// test cancels them rather than have its cleanup's uninstall wait minutes for Slurm to.
	h.mustSh(t, login, "scancel --state=RUNNING")
}

// uninstallWaitsForAJob runs §8 with a job of a few tens of seconds running: the documented
// `kubectl wait --for=delete` returns only after the job has ended, by the end time the job
// itself wrote to the shared volume (held by the test's plain pod, readShared), and the
// namespaces' removal leaves nothing behind.
func (h *helmEnv) uninstallWaitsForAJob(t *testing.T, run docRun, login string, readShared func(string) string) {
	t.Helper()
	job := strings.TrimSpace(h.mustSh(t, login, "chmod 755 /shared && mkdir -p -m 1777 /shared/scratch && "+testenv.AsUser("sbatch --parsable -J uninstall-waits -o /shared/scratch/uninstall-waits.out --wrap 'sleep 25; date +%s'")))
	poll(t, 2*time.Minute, "job "+job+" running", func() error { return h.jobIs(t, login, job, "RUNNING") })
	volumes := h.claimedVolumes(t)
	blocks := docSection(t, userGuide, "## 8. Uninstalling")
	if len(blocks) != 2 {
		t.Fatalf("%s §8: %d sh blocks, want 2: the release's uninstall and wait, then the namespaces", userGuide, len(blocks))
	}
	start := time.Now()
	run.run(t, blocks[0])
	returned := time.Now()
	end, err := strconv.ParseInt(strings.TrimSpace(readShared("scratch/uninstall-waits.out")), 10, 64)
	if err != nil {
		t.Fatalf("job %s's end time on the shared volume: %v", job, err)
	}
	if ended := time.Unix(end, 0); ended.After(returned) {
		t.Errorf("kubectl wait --for=delete returned at %s, before job %s ended at %s", returned.Format(time.TimeOnly), job, ended.Format(time.TimeOnly))
	}
	t.Logf("uninstall and wait: %s; job %s ended %s before the wait returned", returned.Sub(start).Round(time.Second), job,
		returned.Sub(time.Unix(end, 0)).Round(time.Second))
	run.run(t, blocks[1])
	h.nothingLeft(t, volumes)
}
