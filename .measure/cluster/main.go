// Command cluster runs a 3-node JetStream cluster (or one node with -single) until
// SIGTERM, printing its client URLs. Measurement only; not part of the repo.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/abi-engine/engine/internal/broker"
)

func main() {
	dir := flag.String("dir", "", "store dir")
	single := flag.Bool("single", false, "one node")
	flag.Parse()
	var urls []string
	var stop func()
	if *single {
		s, err := broker.Start(*dir)
		if err != nil {
			panic(err)
		}
		urls, stop = []string{s.URL()}, s.Stop
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c, err := broker.StartCluster(ctx, *dir)
		cancel()
		if err != nil {
			panic(err)
		}
		for _, n := range c.Nodes {
			urls = append(urls, n.URL())
		}
		stop = c.Stop
	}
	fmt.Println(strings.Join(urls, ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	stop()
}
