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

	"golang.org/x/net/http/httpguts"

	"sou/index"
)

// WriteWARC writes every stored page as a WARC 1.1 response record (the
// HTTP status line and headers as fetched, and the body as received after
// content-encoding decoding, so Content-Encoding and Transfer-Encoding are
// dropped and Content-Length is set to match), after one warcinfo record.
// It returns the number of response records. A record's URL and headers
// may have come from a peer: header names that are not HTTP tokens are
// dropped, control characters in values become spaces, and the target URI
// has its spaces and control characters percent-encoded, so no field can
// end early or add a line.
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
		if status < 100 || status > 999 {
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
			if !httpguts.ValidHeaderFieldName(k) {
				continue
			}
			for _, v := range r.Header[k] {
				fmt.Fprintf(&http, "%s: %s\r\n", k, fieldValue(v))
			}
		}
		fmt.Fprintf(&http, "Content-Length: %d\r\n\r\n", len(payload))
		http.Write(payload)
		sum := sha1.Sum(payload)
		digest := "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
		if err := writeWARCRecord(bw, "response", warcURI(r.URL), r.FetchedAt, "application/http;msgtype=response", http.Bytes(), digest); err != nil {
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

// fieldValue is v with every ASCII control character (CR and LF among
// them) turned into a space.
func fieldValue(v string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, v)
}

// warcURI percent-encodes the bytes a WARC-Target-URI may not hold: space,
// control characters and DEL.
func warcURI(u string) string {
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		if c := u[i]; c <= ' ' || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
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

// handleWARC streams the export. The status line goes out as 200 with the
// first bytes, so a failure after them cannot be reported by status: the
// connection is broken instead (http.ErrAbortHandler), and the client sees
// a truncated transfer rather than a clean end of a short file.
func (n *Node) handleWARC(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/warc")
	w.Header().Set("Content-Disposition", `attachment; filename="sou.warc"`)
	sent := &countingWriter{w: w}
	if _, err := n.WriteWARC(r.Context(), sent); err != nil {
		n.errs.add("warc export", err)
		n.log.Warn("warc export failed", "err", err, "bytes_sent", sent.n)
		if sent.n == 0 {
			w.Header().Del("Content-Disposition")
			writeError(w, http.StatusInternalServerError, "WARC export failed: "+err.Error())
			return
		}
		// What was sent reaches the client, then the stream breaks.
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}
