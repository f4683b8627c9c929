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

// download streams an API response to a file, replacing it only when the
// whole body arrived.
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
		_, err := io.Copy(os.Stdout, resp.Body)
		return err
	}
	tmp := out + ".partial"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("download: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
