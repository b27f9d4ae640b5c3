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

	"sunk.dev/sunk/pkg/nodewatch"
)

func main() {
	listen := flag.String("listen", ":6830", "address of the changes endpoint ("+nodewatch.Path+")")
	reader := flag.String("reader", "/usr/local/bin/sunk-slurm-nodes", "the program that prints the node table's changes (images/slurm/nodewatch)")
	interval := flag.Duration("interval", 200*time.Millisecond, "how often the reader asks slurmctld for the node table (with update_time: an unchanged table costs one small RPC)")
	staleAfter := flag.Duration("stale-after", 15*time.Second, "the table counts as unreadable when it was not read for this long (a hung slurmctld)")
	flag.Parse()
	if *interval < 10*time.Millisecond {
		log.Fatalf("--interval %s: at least 10ms", *interval)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := nodewatch.NewStore()
	go func() {
		cmd := []string{*reader, "-i", fmt.Sprint(interval.Milliseconds())}
		_ = nodewatch.Run(ctx, s, cmd, time.Second)
	}()
	srv := &http.Server{Addr: *listen, Handler: nodewatch.Handler(s, *staleAfter), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("sunk-nodewatch: serving %s on %s (epoch %s)", nodewatch.Path, *listen, s.Epoch())
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
