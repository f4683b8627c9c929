package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"sou/index"
	"sou/node"
	"sou/search"
)

// OpenBadger opens a Badger in dir with the settings a sou node uses
// (node/store.go), so sizes and speeds are the product's.
func OpenBadger(dir string) (*badger.DB, error) {
	opts := node.BadgerOptions(dir)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open badger in %s: %w", dir, err)
	}
	return db, nil
}

// SouEngine is sou's index and local search over one Badger.
type SouEngine struct {
	dir   string
	db    *badger.DB
	ix    *index.Index
	local *search.Local
}

// OpenSou opens an empty (or existing) sou index in dir with the options
// a node uses (node.IndexOptions).
func OpenSou(dir string) (*SouEngine, error) { return OpenSouWith(dir, node.IndexOptions()) }

// OpenSouWith opens a sou index in dir with opts.
func OpenSouWith(dir string, opts index.Options) (*SouEngine, error) {
	db, err := OpenBadger(dir)
	if err != nil {
		return nil, err
	}
	ix, err := index.Open(db, opts, slog.New(slog.DiscardHandler))
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open sou index: %w", err)
	}
	return &SouEngine{dir: dir, db: db, ix: ix, local: search.NewLocal(ix, search.DefaultParams())}, nil
}

// WithParams returns an engine that searches the same index with ranking
// parameters p (to measure what each signal adds). It shares e's index:
// close e, not it.
func (e *SouEngine) WithParams(p search.Params) *SouEngine {
	return &SouEngine{dir: e.dir, db: e.db, ix: e.ix, local: search.NewLocal(e.ix, p)}
}

// Dir is the Badger directory.
func (e *SouEngine) Dir() string { return e.dir }

// Index returns the underlying index.
func (e *SouEngine) Index() *index.Index { return e.ix }

// AddAll Puts docs from GOMAXPROCS goroutines (Put compresses outside
// its lock, as in the node) and flushes (the flush analyses the queued
// pages on all cores).
func (e *SouEngine) AddAll(ctx context.Context, docs []Doc) error {
	ds := make([]*index.Document, len(docs))
	for i := range docs {
		d := &docs[i]
		ds[i] = &index.Document{
			URL: d.URL, Host: d.Host, Title: d.Title, Headings: d.Headings, Body: d.Body, Lang: d.Lang,
			Status: 200, ContentType: "text/html", Charset: "utf-8",
		}
	}
	if err := putAll(ctx, e.ix, ds); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.ix.Flush(ctx); err != nil {
		return fmt.Errorf("sou flush: %w", err)
	}
	return nil
}

// putAll Puts docs from GOMAXPROCS goroutines, as a node's processing
// stage does, and returns the first error.
func putAll(ctx context.Context, ix *index.Index, docs []*index.Document) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan *index.Document)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for d := range next {
				if err := ix.Put(ctx, d); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("sou put %s: %w", d.URL, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, d := range docs {
		if ctx.Err() != nil {
			break
		}
		next <- d
	}
	close(next)
	wg.Wait()
	return firstErr
}

// Search returns the URLs of the top k results of q (AND semantics, BM25F,
// static rank, snippets: the product's local search).
func (e *SouEngine) Search(ctx context.Context, q string, k int) ([]string, error) {
	pq, err := search.ParseQuery(q, e.ix.Analyzer())
	if err != nil {
		if errors.Is(err, search.ErrEmptyQuery) {
			return nil, nil
		}
		return nil, fmt.Errorf("sou parse %q: %w", q, err)
	}
	res, err := e.local.Search(ctx, pq, k, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("sou search %q: %w", q, err)
	}
	out := make([]string, len(res.Candidates))
	for i, c := range res.Candidates {
		out[i] = c.URL
	}
	return out, nil
}

// Close flushes and closes the index and the Badger.
func (e *SouEngine) Close() error {
	err := e.ix.Close()
	if cerr := e.db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close sou engine: %w", err)
	}
	return nil
}

// Timed runs fn and returns its wall time.
func Timed(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}
