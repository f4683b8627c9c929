package testnet

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"sou/search"
)

// qrel is one known-item judgment: a query and the URLs that answer it.
type qrel struct {
	ID, Query string
	Relevant  []string
}

// readQrels reads the TSV that ../shared/corpus/qrels.py prints:
// QID <tab> QUERY <tab> URL[,URL...].
func readQrels(path string) ([]qrel, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--qrels: %w", err)
	}
	defer f.Close()
	var out []qrel
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		parts := strings.Split(sc.Text(), "\t")
		if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
			return nil, fmt.Errorf("%s:%d: want QID<TAB>QUERY<TAB>URL[,URL...]", path, line)
		}
		out = append(out, qrel{ID: parts[0], Query: parts[1], Relevant: strings.Split(parts[2], ",")})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no judgments", path)
	}
	return out, nil
}

// hostPath is what a known-item match compares: host (lowercase, default
// port dropped) and path; query string and fragment ignored. It matches
// bench.MatchKey, which scores the side-by-side benchmark the same way.
func hostPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	return strings.TrimSuffix(strings.ToLower(u.Host), ":80") + p
}

// scoreQrels runs every judged query at node p and returns MRR@10 and
// Success@10.
func scoreQrels(ctx context.Context, p *nodeProc, qs []qrel) (mrr, s10 float64, err error) {
	for _, q := range qs {
		v := url.Values{"q": {q.Query}, "n": {"10"}, "timeout": {(2 * time.Second).String()}}
		var resp search.Response
		if err := p.getJSON(ctx, "/api/search?"+v.Encode(), &resp); err != nil {
			return 0, 0, fmt.Errorf("qrels query %s %q: %w", q.ID, q.Query, err)
		}
		want := map[string]bool{}
		for _, r := range q.Relevant {
			want[hostPath(r)] = true
		}
		for i, r := range resp.Results {
			if want[hostPath(r.URL)] {
				mrr += 1 / float64(i+1)
				s10++
				break
			}
		}
	}
	n := float64(len(qs))
	return round3(mrr / n), round3(s10 / n), nil
}
