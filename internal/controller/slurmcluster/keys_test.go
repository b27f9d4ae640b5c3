package slurmcluster

import (
	"bytes"
	"testing"

	"golang.org/x/crypto/ssh"
)

// TestSSHHostKey: a key sshd reads (OpenSSH's private key format, ed25519), new at each call.
func TestSSHHostKey(t *testing.T) {
	a, err := sshHostKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sshHostKey()
	if bytes.Equal(a, b) {
		t.Error("two calls made one key")
	}
	k, err := ssh.ParsePrivateKey(a)
	if err != nil || k.PublicKey().Type() != ssh.KeyAlgoED25519 || !bytes.HasPrefix(a, []byte("-----BEGIN OPENSSH PRIVATE KEY-----")) {
		t.Fatalf("%v %s", err, a)
	}
}
