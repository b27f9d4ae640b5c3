//go:build integration

// Package testbed checks the test environments themselves: the API server stores objects and
// the Slurm test bed runs a batch job to completion.
package testbed

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sunk.dev/sunk/test/testenv"
)

// The API environment is a real etcd + kube-apiserver: an object written is read back with the
// server's own metadata.
func TestAPIEnvironmentStoresObjects(t *testing.T) {
	cfg := testenv.API(t, testenv.APIOptions{})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "sunk-testbed", Namespace: "default"},
		Data:       map[string]string{"slurm.conf": "ClusterName=sunk"},
	}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatalf("create: %v", err)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Data["slurm.conf"] != "ClusterName=sunk" || got.UID == "" || got.ResourceVersion == "" {
		t.Fatalf("read back %+v, want the data written and server-set uid/resourceVersion", got)
	}
}
