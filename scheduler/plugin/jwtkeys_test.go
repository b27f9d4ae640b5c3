package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"sunk.dev/sunk/pkg/wellknown"
	"sunk.dev/sunk/test/wait"
)

func TestArgsValidate(t *testing.T) {
	ok := Args{SlurmURL: "http://r:6820", MarkKeyFile: "/m", Cluster: "c1", Namespace: "slurm", JWTKeySecret: "c1-jwt-key"}
	checkArgs(t, ok, []argsRefusal{
		{func(a *Args) { a.SlurmURL = "" }, "slurmURL is required"},
		{func(a *Args) { a.MarkKeyFile = "" }, "markKeyFile is required"},
		{func(a *Args) { a.Namespace = "" }, "namespace is required"},
		{func(a *Args) { a.JWTKeySecret = "" }, "exactly one of jwtKeySecret"},
		{func(a *Args) { a.JWTKeyFile = "/k" }, "exactly one of jwtKeySecret"},
	})
	file := ok
	file.JWTKeySecret, file.JWTKeyFile = "", "/k"
	if err := file.validate(); err != nil {
		t.Error(err)
	}
}

// argsRefusal is a change that makes valid Args invalid, and what validate's error must say.
type argsRefusal struct {
	change func(*Args)
	want   string
}

// checkArgs: ok validates, and each refusal's change of it is refused saying its want.
func checkArgs(t *testing.T, ok Args, refusals []argsRefusal) {
	t.Helper()
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for _, r := range refusals {
		a := ok
		r.change(&a)
		if err := a.validate(); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%+v: %v, want %q", a, err, r.want)
		}
	}
}

// TestSecretKeys: the keys come from the Secret through the API, a rotation's previous key
// after the current one, and a missing Secret or key is an error naming it, never no key.
func TestSecretKeys(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "slurm", Name: "c1-jwt-key"},
		Data: map[string][]byte{wellknown.SecretJWTKey: []byte("k1")}}
	cs := fake.NewClientset(secret)
	k := newSecretKeys(ctx, cs, "slurm", "c1-jwt-key")
	keys, err := k.read()
	if err != nil || len(keys) != 1 || string(keys[0]) != "k1" {
		t.Fatalf("keys %q, error %v", keys, err)
	}

	rotated := secret.DeepCopy()
	rotated.Data = map[string][]byte{wellknown.SecretJWTKey: []byte("k2"), wellknown.SecretJWTPreviousKey: []byte("k1")}
	if _, err := cs.CoreV1().Secrets("slurm").Update(ctx, rotated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the rotated keys", 10*time.Second, 10*time.Millisecond, func() error {
		keys, err := k.read()
		if err != nil || len(keys) != 2 || string(keys[0]) != "k2" || string(keys[1]) != "k1" {
			return fmt.Errorf("keys %q, error %v", keys, err)
		}
		return nil
	})

	empty := rotated.DeepCopy()
	empty.Data = map[string][]byte{wellknown.SecretJWTPreviousKey: []byte("k1")}
	if _, err := cs.CoreV1().Secrets("slurm").Update(ctx, empty, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the refusal of a Secret without jwt.key", 10*time.Second, 10*time.Millisecond, func() error {
		if _, err := k.read(); err == nil || !strings.Contains(err.Error(), "slurm/c1-jwt-key has no jwt.key") {
			return fmt.Errorf("error %v", err)
		}
		return nil
	})

	if err := cs.CoreV1().Secrets("slurm").Delete(ctx, "c1-jwt-key", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the refusal of a missing Secret", 10*time.Second, 10*time.Millisecond, func() error {
		if _, err := k.read(); err == nil || !strings.Contains(err.Error(), "slurm/c1-jwt-key does not exist") {
			return fmt.Errorf("error %v", err)
		}
		return nil
	})
}
