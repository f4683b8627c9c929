package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"sou/eval"
)

// Query is one benchmark query; Relevant lists the URLs that answer it
// (empty when the query set carries no judgments).
type Query struct {
	ID       string
	Text     string
	Relevant []string
}

// TitleQueries picks n documents (deterministically from seed) with a
// title of at least two words or characters and makes known-item queries
// of their titles: the document is the relevant answer.
func TitleQueries(docs []Doc, n int, seed uint64) []Query {
	idx := make([]int, 0, len(docs))
	for i, d := range docs {
		if len([]rune(strings.TrimSpace(d.Title))) >= 2 {
			idx = append(idx, i)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x50))
	r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	if len(idx) > n {
		idx = idx[:n]
	}
	qs := make([]Query, len(idx))
	for k, i := range idx {
		qs[k] = Query{ID: fmt.Sprintf("title-%04d", k), Text: docs[i].Title, Relevant: []string{docs[i].URL}}
	}
	return qs
}

// QrelsScript is the judgment builder of the shared corpus.
const QrelsScript = "/work/shared/corpus/qrels.py"

// LoadQrels runs qrels.py for a LibreOffice development set (zh-CN or
// en-US) and parses its QID<TAB>QUERY<TAB>URL[,URL...] lines.
func LoadQrels(ctx context.Context, script, lang string, n int) ([]Query, error) {
	cmd := exec.CommandContext(ctx, "python3", script, "libreoffice", lang, "--n", fmt.Sprint(n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("qrels.py libreoffice %s: %w: %s", lang, err, strings.TrimSpace(stderr.String()))
	}
	set, err := eval.Parse(bytes.NewReader(out), "lo-"+lang)
	if err != nil {
		return nil, fmt.Errorf("qrels.py libreoffice %s: %w", lang, err)
	}
	qs := make([]Query, len(set.Judgments))
	for i, j := range set.Judgments {
		qs[i] = Query{ID: j.ID, Text: j.Query, Relevant: j.Relevant}
	}
	return qs, nil
}

// Quality holds known-item metrics over a query set.
type Quality struct {
	Queries   int
	MRR10     float64 // mean reciprocal rank of the first relevant result in the top 10
	Success10 float64 // share of queries with a relevant result in the top 10
}

// Judge scores ranked result lists (one per query, in query order) with
// sou/eval's rules; queries without judgments are left out.
func Judge(qs []Query, results [][]string) Quality {
	var q Quality
	for i, query := range qs {
		if len(query.Relevant) == 0 {
			continue
		}
		q.Queries++
		if rank, _ := eval.Judge(eval.Judgment{Relevant: query.Relevant}, results[i]); rank > 0 {
			q.MRR10 += 1 / float64(rank)
			q.Success10++
		}
	}
	if q.Queries > 0 {
		q.MRR10 /= float64(q.Queries)
		q.Success10 /= float64(q.Queries)
	}
	return q
}

// Overlap is the mean over queries of |A∩B| / max(|A|,|B|) for the top 10
// of two engines (1 when both are empty), and the mean Jaccard index.
func Overlap(a, b [][]string) (shared, jaccard float64) {
	n := min(len(a), len(b))
	if n == 0 {
		return 0, 0
	}
	for i := range n {
		x, y := a[i][:min(10, len(a[i]))], b[i][:min(10, len(b[i]))]
		set := map[string]bool{}
		for _, u := range x {
			set[eval.MatchKey(u)] = true
		}
		inter := 0
		union := len(set)
		for _, u := range y {
			k := eval.MatchKey(u)
			if set[k] {
				inter++
			} else {
				union++
			}
		}
		if m := max(len(x), len(y)); m == 0 {
			shared++
			jaccard++
		} else {
			shared += float64(inter) / float64(m)
			jaccard += float64(inter) / float64(union)
		}
	}
	return shared / float64(n), jaccard / float64(n)
}

// Latency summarises per-query latencies.
type Latency struct {
	N             int
	P50, P99, Max time.Duration
	Mean          time.Duration
}

// Summarize computes nearest-rank percentiles.
func Summarize(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Latency{N: len(s), P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

// DiskUsage is what du reports for dir: allocated blocks of every regular
// file below it, in bytes.
func DiskUsage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the directory was read (a compaction of a live store)
		}
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return total, nil
}
