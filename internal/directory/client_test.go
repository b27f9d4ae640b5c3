package directory

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// closedAddr is a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestDialFailsOverToTheNextURI(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Anonymous and without StartTLS, Dial sends nothing, so a bare listener is a server.
	c, err := Dial(ctx, Config{URIs: []string{"ldap://" + closedAddr(t), "ldap://" + l.Addr().String()}, SearchBase: base})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case conn := <-accepted:
		defer func() { _ = conn.Close() }()
	case <-ctx.Done():
		t.Fatal("Dial did not connect to the second URI")
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func TestDialReportsEveryURI(t *testing.T) {
	a, b := "ldap://"+closedAddr(t), "ldap://"+closedAddr(t)
	c, err := Dial(context.Background(), Config{URIs: []string{a, b}, SearchBase: base, Domain: "directory"})
	if err == nil {
		_ = c.Close()
		t.Fatal("Dial succeeded without a server")
	}
	for _, want := range []string{"domain directory", a, b} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to name %s", err, want)
		}
	}
}

func TestDialRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{SearchBase: base},
		{URIs: []string{"ldap://localhost"}, SearchBase: base, Schema: "nis"},
	} {
		if c, err := Dial(context.Background(), cfg); err == nil {
			_ = c.Close()
			t.Errorf("Dial(%+v) succeeded", cfg)
		}
	}
}
