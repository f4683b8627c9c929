package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func newExportCmd() *cobra.Command {
	export := &cobra.Command{Use: "export", Short: "Export a node's stored pages"}
	var c clientFlags
	var out string
	warc := &cobra.Command{
		Use:   "warc --out FILE",
		Short: "Write the node's stored responses as WARC 1.1",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return &exitError{code: exitUsage, err: errors.New("--out FILE is required")}
			}
			return c.download(cmd.Context(), "/api/export/warc", out)
		},
	}
	c.register(warc)
	warc.Flags().StringVar(&out, "out", "", "output file (- for stdout)")
	export.AddCommand(warc)
	return export
}

// download streams an API response to out through out.partial, renamed to
// out only when the whole body arrived: a node that fails half-way breaks
// the connection, and the transfer then ends in an error here instead of
// looking complete. An interrupted download keeps the partial file, says
// so, and exits non-zero.
func (c *clientFlags) download(ctx context.Context, path, out string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(c.node, "/")+path, nil)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--node %q: %w", c.node, err)}
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("node %s unreachable: %w", c.node, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out == "-" {
		if n, err := io.Copy(os.Stdout, resp.Body); err != nil {
			return fmt.Errorf("download of %s interrupted after %d bytes (the output is incomplete): %w", path, n, err)
		}
		return nil
	}
	tmp := out + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	n, err := io.Copy(f, resp.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("download of %s interrupted after %d bytes: %w; %s is incomplete and was not renamed to %s", path, n, err, tmp, out)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, out, err)
	}
	return nil
}
