// sunk-tlsproxy is slurmrestd's TLS terminator (internal/tlsproxy): in slurmrestd's pod, it
// serves slurmrestd's port over TLS with the cluster's serving certificate and passes each
// request to slurmrestd on 127.0.0.1.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/tlsproxy"
	"sunk.dev/sunk/pkg/clustertls"
)

func main() {
	listen := flag.String("listen", fmt.Sprintf(":%d", clusternames.SlurmrestdPort), "the TLS address clients reach")
	backend := flag.String("backend", fmt.Sprintf("http://127.0.0.1:%d", clusternames.SlurmrestdLocalPort), "slurmrestd, in the same pod")
	cert := flag.String("cert", "", "the serving certificate, PEM (the TLS Secret's "+clustertls.CertKey+"; read again after a renewal)")
	key := flag.String("key", "", "its key, PEM (the TLS Secret's "+clustertls.KeyKey+")")
	flag.Parse()
	logger := log.New(os.Stderr, "sunk-tlsproxy: ", log.LstdFlags)
	if *cert == "" || *key == "" {
		logger.Fatal("--cert and --key are required")
	}
	certs, err := clustertls.NewCertFiles(*cert, *key)
	if err != nil {
		logger.Fatal(err)
	}
	srv, err := tlsproxy.Server(*listen, certs, *backend, logger)
	if err != nil {
		logger.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logger.Printf("serving %s over TLS for %s", *listen, *backend)
	if err := tlsproxy.Serve(srv); err != nil {
		logger.Fatal(err)
	}
}
