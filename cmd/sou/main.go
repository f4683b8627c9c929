// Command sou is the one binary of the sou network: a node, its clients, and
// the testnets.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries the process exit code for a failure that has already
// been explained to the user.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sou:", err)
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		stop()
		os.Exit(code)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sou",
		Short:         "sou (搜) — a peer-to-peer web crawler and search network",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	testnet := &cobra.Command{
		Use:   "testnet",
		Short: "Simulated web and test networks on this machine",
	}
	testnet.AddCommand(newTestnetWebCmd(), newTestnetRunCmd(), newTestnetUpCmd(), newTestnetSimCmd())
	root.AddCommand(newNodeCmd(), newSearchCmd(), newCrawlCmd(), newStatusCmd(), newPeersCmd(), newEvalCmd(), newExportCmd(), testnet)
	return root
}
