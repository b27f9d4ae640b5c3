//go:build e2e

package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/controller/slurmcluster"
	"sunk.dev/sunk/internal/directory"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/wellknown"
)

// slapdImage is Debian's slapd with a seeding entrypoint (images/slapd, hack/images.sh slapd).
const slapdImage = "sunk.dev/slapd:local"

// ada, as testdata/ldap/directory.ldif has her and `id` must show her wherever SSSD runs.
const adaID = "uid=20001(ada) gid=20001(ada) groups=20001(ada),20100(analysts)"

// TestLDAPUserJobAndAccounting runs a real directory (slapd, as the slurm chart's companion
// directory renders it: directory.enabled, and the chart's sssd.conf) and a cluster with accounting whose
// login pods (spec.login.sssdConfigSecretRef), controller (the same SSSD, beside slurmctld) and
// compute pods (an sssd container the operator adds beside slurmd, nothing in the NodeSet)
// resolve its users. ada, who exists only in LDAP, logs in to the login pod with ssh, through
// its Service, by the key the directory holds for her (sshPublicKey, through SSSD's ssh
// responder), submits a batch job that runs as her uid and groups on the compute pod, and
// sacct -u ada lists it. slurmdbd is then restarted while her job runs, and held down
// until the job has ended: slurmctld keeps the job's end for slurmdbd, and sacct shows the job
// COMPLETED once slurmdbd is back.
func TestLDAPUserJobAndAccounting(t *testing.T) {
	parallel(t)
	e := startOperator(t)
	ctx := context.Background()
	// ada's SSH key lives in the directory (sshPublicKey) and nowhere in the cluster.
	adaKey, adaPub := sshKeyPair(t)
	graceKey, gracePub := sshKeyPair(t)
	bobKey, bobPub := sshKeyPair(t)
	const name = "ldap"
	e.startDirectory(t, name, adaPub, gracePub, bobPub)
	e.createReady(t, &sunkv1.SlurmCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: sunkv1.SlurmClusterSpec{SlurmVersion: testSlurmVersion, Image: slurmImage, ImagePullPolicy: corev1.PullNever,
			Accounting: sunkv1.AccountingSpec{Mode: sunkv1.AccountingManaged},
			Login: sunkv1.LoginSpec{SSSDConfigSecretRef: &corev1.LocalObjectReference{Name: name + "-sssd"},
				Pools: []sunkv1.LoginPool{{Name: "users", Group: "analysts", GracePeriod: &metav1.Duration{Duration: 3 * time.Second},
					Home: &sunkv1.StorageSpec{}},
					{Name: "team", Type: sunkv1.LoginPoolGroup, Group: "analysts"}}}},
	})
	if err := e.c.Create(ctx, &sunkv1.NodeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "cpu"},
		Spec: sunkv1.NodeSetSpec{ClusterRef: name, Mode: sunkv1.NodeSetReplicas, Replicas: ptr.To(int32(1)), Image: slurmImage,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("400Mi")}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	n := clusternames.For(e.cluster(t, name), "")
	login := e.podOf(t, name, wellknown.ComponentLogin).Name
	e.waitIdle(t, login, 3*time.Minute, "cpu-0 idle", "cpu-0")
	e.checkLoginPool(t, name, n, adaKey, graceKey, bobKey)

	// ada resolves, with both groups, in the three places Slurm looks her up.
	for _, at := range [][2]string{{login, render.LoginContainer}, {n.ControllerPod(0), render.ControllerContainer}, {"cpu-0", "slurmd"}} {
		poll(t, time.Minute, "ada from LDAP in "+at[0]+"/"+at[1], func() error {
			out, err := e.sh(t, at[0], at[1], "id ada")
			if err != nil || strings.TrimSpace(out) != adaID {
				return fmt.Errorf("id ada: %v %q", err, out)
			}
			return nil
		})
	}

	// ada logs in with ssh, through the login Service, by the key the directory holds for her,
	// and submits; her job waits for a file the test makes. The client is Go's
	// (golang.org/x/crypto/ssh) from the test process, which reaches cluster IPs: the 26.05
	// image has no ssh client.
	job := e.sshAsAda(t, n, adaKey, "sbatch --parsable -w cpu-0 -J ldap-job -D /tmp -o /tmp/ldap-%j.out", `#!/bin/sh
id
while [ ! -e /tmp/ldap-release ]; do sleep 0.2; done
`)
	poll(t, 2*time.Minute, "ada's job writes its id", func() error {
		out, err := e.sh(t, "cpu-0", "slurmd", "stat -c %u:%g /tmp/ldap-"+job+".out && cat /tmp/ldap-"+job+".out")
		if err != nil || !strings.Contains(out, "20001:20001\n"+adaID) {
			return fmt.Errorf("the job's output: %v %q", err, out)
		}
		return nil
	})
	sacct := "su - ada -c 'sacct -u ada -X -n -P -o JobID,User,Group,State'"
	e.waitSacct(t, login, sacct, job+"|ada|ada|RUNNING")

	// slurmdbd goes while the job runs, and stays away (a quota holds its pod back) until the
	// job has ended.
	e.holdBackPods(t)
	stopped := time.Now()
	dbd := n.AccountingPod()
	if err := e.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: dbd}}); err != nil {
		t.Fatal(err)
	}
	poll(t, 2*time.Minute, "slurmdbd's pod gone", func() error {
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: dbd}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s: %v", dbd, err)
		}
		return nil
	})
	if out, err := e.sh(t, login, render.LoginContainer, sacct); err == nil {
		t.Fatalf("sacct answered with slurmdbd gone:\n%s", out)
	}
	e.mustSh(t, "cpu-0", "slurmd", "touch /tmp/ldap-release")
	if state, exit, _ := e.jobEnd(t, login, job, time.Minute); state != "COMPLETED" || exit != "0:0" {
		t.Fatalf("ada's job ended %s, exit code %s", state, exit)
	}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: dbd}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("slurmdbd's pod came back before the job ended (%v): the test proves nothing", err)
	}
	ended := time.Now()
	e.releasePods(t, n.Accounting)
	e.waitSacct(t, login, sacct, job+"|ada|ada|COMPLETED")
	t.Logf("the job ended %s after slurmdbd's pod was deleted, with slurmdbd still away; sacct showed it COMPLETED %s after the pod was let back",
		ended.Sub(stopped).Round(time.Second), time.Since(ended).Round(time.Second))
}

// startDirectory runs the slurm chart's companion directory for the cluster name (directory.enabled:
// its templates rendered by helm and created here, since the test makes the cluster itself)
// with ada and grace (analysts) and bob in it, their groups and their SSH keys, and the chart's sssd.conf in the Secret
// <name>-sssd; it returns once slapd answers.
func (e *operatorEnv) startDirectory(t *testing.T, name, adaSSHKey, graceSSHKey, bobSSHKey string) {
	t.Helper()
	ctx := context.Background()
	values := filepath.Join(t.TempDir(), "directory.yaml")
	if err := os.WriteFile(values, []byte(fmt.Sprintf(`directory:
  enabled: true
  image: %s
  pullPolicy: Never
  suffix: dc=sunk,dc=test
  users:
    - {name: ada, uid: 20001, groups: [analysts], home: /tmp, shell: /bin/sh, sshKeys: [%q]}
    - {name: grace, uid: 20002, groups: [analysts], home: /home/grace, shell: /bin/sh, sshKeys: [%q]}
    - {name: bob, uid: 20003, home: /tmp, shell: /bin/sh, sshKeys: [%q]}
  groups:
    - {name: analysts, gid: 20100}
`, slapdImage, adaSSHKey, graceSSHKey, bobSSHKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := e.helm(t, "template", name, "charts/slurm", "-n", e.ns, "-f", values,
		"--show-only", "templates/directory.yaml", "--show-only", "templates/secrets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		e.createYAML(t, doc)
	}
	poll(t, time.Minute, "the directory Ready", func() error {
		d := &appsv1.Deployment{}
		if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: name + "-directory"}, d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas < 1 {
			return fmt.Errorf("deployment %s: %d ready", d.Name, d.Status.ReadyReplicas)
		}
		return nil
	})
}

// sshKeyPair makes an ed25519 key: its signer, and the public key as an authorized_keys line.
func sshKeyPair(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return signer, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
}

// sshAsAda runs command as ada over ssh to the login Service's cluster IP, with stdin, and
// returns its trimmed output. The login pods' host key must be the one the operator keeps in
// the cluster's ssh-host-key Secret. A refusal is asked again for a minute: SSSD's ssh
// responder may not have read the directory yet.
func (e *operatorEnv) sshAsAda(t *testing.T, n clusternames.Names, key ssh.Signer, command, stdin string) string {
	t.Helper()
	out, err := e.sshTo(t, n.Login, n.SSHHostKeySecret, "ada", key, command, stdin)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sshTo runs command as user over ssh to port 22 of the Service svc's cluster IP, with stdin,
// checking the host key against the one in the Secret hostKeySecret, and returns its trimmed
// output. A connection or login refused is asked again for a minute (sshd or the directory
// may not be ready yet); a command that fails is the returned error.
func (e *operatorEnv) sshTo(t *testing.T, svcName, hostKeySecret, user string, key ssh.Signer, command, stdin string) (string, error) {
	t.Helper()
	addr, cfg := e.sshConfig(t, svcName, hostKeySecret, user, key)
	var out []byte
	var cmdErr error
	poll(t, time.Minute, "ssh "+user+"@"+addr+" "+command, func() error {
		c, err := ssh.Dial("tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		sess, err := c.NewSession()
		if err != nil {
			return err
		}
		defer sess.Close()
		sess.Stdin = strings.NewReader(stdin)
		if out, err = sess.CombinedOutput(command); err != nil {
			cmdErr = fmt.Errorf("ssh %s@%s %s: %v\n%s", user, addr, command, err, out)
		}
		return nil
	})
	return strings.TrimSpace(string(out)), cmdErr
}

// sshConfig is the address of port 22 of the Service svc and a client configuration that logs
// in as user with key and trusts only the host key in the Secret hostKeySecret.
func (e *operatorEnv) sshConfig(t *testing.T, svcName, hostKeySecret, user string, key ssh.Signer) (string, *ssh.ClientConfig) {
	t.Helper()
	ctx := context.Background()
	svc, hostKeys := &corev1.Service{}, &corev1.Secret{}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: svcName}, svc); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: hostKeySecret}, hostKeys); err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.ParsePrivateKey(hostKeys.Data[render.SSHHostKeyName])
	if err != nil {
		t.Fatalf("the SSH host key of %s: %v", hostKeySecret, err)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, "22"), &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey()), Timeout: 10 * time.Second}
}

// dialThroughServiceIP opens a cluster's directory from this test process, which has no
// cluster DNS: an ldap URI's host <svc>.<namespace>.svc[...] becomes the Service's cluster IP,
// read from the API. The operator in its pod dials the name itself.
func dialThroughServiceIP(api client.Reader) func(ctx context.Context, cfg directory.Config) (slurmcluster.MemberLister, error) {
	return func(ctx context.Context, cfg directory.Config) (slurmcluster.MemberLister, error) {
		for i, uri := range cfg.URIs {
			u, err := url.Parse(uri)
			if err != nil {
				return nil, err
			}
			parts := strings.Split(u.Hostname(), ".")
			if len(parts) < 3 || parts[2] != "svc" {
				continue
			}
			svc := &corev1.Service{}
			if err := api.Get(ctx, types.NamespacedName{Namespace: parts[1], Name: parts[0]}, svc); err != nil {
				return nil, err
			}
			port := u.Port()
			if port == "" {
				port = "389"
			}
			u.Host = net.JoinHostPort(svc.Spec.ClusterIP, port)
			cfg.URIs[i] = u.String()
		}
		return directory.Dial(ctx, cfg)
	}
}
