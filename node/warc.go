package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"sou/index"
)

// WriteWARC writes every stored page as a WARC 1.1 response record (the
// HTTP status line and headers as fetched, and the body as received after
// content-encoding decoding, so Content-Encoding and Transfer-Encoding are
// dropped and Content-Length is set to match), after one warcinfo record.
// It returns the number of response records.
func (n *Node) WriteWARC(ctx context.Context, w io.Writer) (int, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	info := fmt.Sprintf("software: sou\r\nformat: WARC File Format 1.1\r\nconformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\nisPartOf: %s\r\nrobots: obey\r\n", n.cfg.Network)
	if err := writeWARCRecord(bw, "warcinfo", "", time.Now(), "application/warc-fields", []byte(info), ""); err != nil {
		return 0, err
	}
	count := 0
	err := n.ix.ForEachPage(ctx, "", func(r *index.PageRecord) error {
		payload := r.Raw
		var http bytes.Buffer
		status := r.Status
		if status == 0 {
			status = 200
		}
		fmt.Fprintf(&http, "HTTP/1.1 %d %s\r\n", status, statusText(status))
		keys := make([]string, 0, len(r.Header))
		for k := range r.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch strings.ToLower(k) {
			case "content-length", "content-encoding", "transfer-encoding":
				continue
			}
			for _, v := range r.Header[k] {
				fmt.Fprintf(&http, "%s: %s\r\n", k, strings.NewReplacer("\r", " ", "\n", " ").Replace(v))
			}
		}
		fmt.Fprintf(&http, "Content-Length: %d\r\n\r\n", len(payload))
		http.Write(payload)
		sum := sha1.Sum(payload)
		digest := "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
		if err := writeWARCRecord(bw, "response", r.URL, r.FetchedAt, "application/http;msgtype=response", http.Bytes(), digest); err != nil {
			return err
		}
		count++
		return nil
	})
	if err != nil {
		return count, err
	}
	return count, bw.Flush()
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Status"
}

func writeWARCRecord(w io.Writer, typ, target string, at time.Time, contentType string, block []byte, payloadDigest string) error {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	var h strings.Builder
	h.WriteString("WARC/1.1\r\n")
	fmt.Fprintf(&h, "WARC-Type: %s\r\n", typ)
	fmt.Fprintf(&h, "WARC-Record-ID: <urn:uuid:%x-%x-%x-%x-%x>\r\n", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
	fmt.Fprintf(&h, "WARC-Date: %s\r\n", at.UTC().Format("2006-01-02T15:04:05Z"))
	if target != "" {
		fmt.Fprintf(&h, "WARC-Target-URI: %s\r\n", target)
	}
	if payloadDigest != "" {
		fmt.Fprintf(&h, "WARC-Payload-Digest: %s\r\n", payloadDigest)
		sum := sha1.Sum(block)
		fmt.Fprintf(&h, "WARC-Block-Digest: sha1:%s\r\n", base32.StdEncoding.EncodeToString(sum[:]))
	}
	fmt.Fprintf(&h, "Content-Type: %s\r\n", contentType)
	fmt.Fprintf(&h, "Content-Length: %d\r\n\r\n", len(block))
	if _, err := io.WriteString(w, h.String()); err != nil {
		return err
	}
	if _, err := w.Write(block); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\r\n\r\n")
	return err
}

func (n *Node) handleWARC(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/warc")
	w.Header().Set("Content-Disposition", `attachment; filename="sou.warc"`)
	if _, err := n.WriteWARC(r.Context(), w); err != nil {
		n.errs.add("warc export", err)
		n.log.Warn("warc export", "err", err)
	}
}
