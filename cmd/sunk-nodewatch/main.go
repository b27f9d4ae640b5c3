// sunk-nodewatch is the node watcher beside slurmctld: it reads Slurm's node table through
// sunk-slurm-nodes (Slurm's own library, binary RPC) and serves its changes to the syncer
// (pkg/nodewatch, docs/syncer.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
)

func main() {
	listen := flag.String("listen", ":6830", "address of the changes endpoint ("+nodewatch.Path+")")
	reader := flag.String("reader", "/usr/local/bin/sunk-slurm-nodes", "the program that prints the node table's changes (images/slurm/nodewatch)")
	interval := flag.Duration("interval", 200*time.Millisecond, "how often the reader asks slurmctld for the node table (with update_time: an unchanged table costs one small RPC)")
	staleAfter := flag.Duration("stale-after", 15*time.Second, "the table counts as unreadable when it was not read for this long (a hung slurmctld)")
	jwtKey := flag.String("jwt-key", "", "the cluster's HS256 JWT key file (required): a request must carry a token of this key (or of FILE"+slurm.FallbackKeySuffix+" during a rotation) naming --user")
	user := flag.String("user", "slurm", "the user a token must name: the cluster's SlurmUser, whose tokens sunk's components sign")
	tlsCert := flag.String("tls-cert", "", "serve TLS with this certificate, PEM (the cluster's TLS Secret's "+clustertls.CertKey+"; read again after a renewal); with --tls-key")
	tlsKey := flag.String("tls-key", "", "the certificate's key, PEM")
	flag.Parse()
	if *interval < 10*time.Millisecond {
		log.Fatalf("--interval %s: at least 10ms", *interval)
	}
	if *jwtKey == "" {
		log.Fatal("--jwt-key is required: the watcher answers the cluster's SlurmUser only")
	}
	auth, err := nodewatch.NewJWTAuth(*user, *jwtKey)
	if err != nil {
		log.Fatal(err)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		log.Fatal("--tls-cert and --tls-key go together")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := nodewatch.NewStore()
	go func() {
		cmd := []string{*reader, "-i", fmt.Sprint(interval.Milliseconds())}
		_ = nodewatch.Run(ctx, s, cmd, time.Second)
	}()
	srv := &http.Server{Addr: *listen, Handler: nodewatch.Handler(s, *staleAfter, auth), ReadHeaderTimeout: 10 * time.Second}
	serve := srv.ListenAndServe
	if *tlsCert != "" {
		// The requests carry SlurmUser's tokens: with TLS (spec.tls) nobody on the pod network reads them.
		certs, err := clustertls.NewCertFiles(*tlsCert, *tlsKey)
		if err != nil {
			log.Fatal(err)
		}
		srv.TLSConfig = certs.ServerConfig()
		serve = func() error { return srv.ListenAndServeTLS("", "") }
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("sunk-nodewatch: serving %s on %s, TLS %v (epoch %s)", nodewatch.Path, *listen, srv.TLSConfig != nil, s.Epoch())
	if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
