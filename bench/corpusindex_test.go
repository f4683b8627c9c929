package bench

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIndexCorpus indexes a sample of the real corpus (every k-th
// page of the main sites, SOU_BENCH_CORPUS_DOCS pages, default 6,000;
// 0 for all) into a fresh sou index per op: open, Put from GOMAXPROCS
// goroutines, Flush, Close. Corpus pages are long and a fifth of them are
// Chinese, so this is where segmentation costs show; the synthetic
// BenchmarkIndex has neither. It reports docs/s and the process's CPU per
// page (user + system), the figure that stays comparable on a busy machine.
//
//	go test -run '^$' -bench BenchmarkIndexCorpus -benchtime 1x -count 6 ./bench/
func BenchmarkIndexCorpus(b *testing.B) {
	if _, err := os.Stat(DefaultSitesTSV); err != nil {
		b.Skipf("real corpus not installed (%v); install it with ../shared/corpus/install.sh", err)
	}
	n := 6000
	if v := os.Getenv("SOU_BENCH_CORPUS_DOCS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			b.Fatalf("SOU_BENCH_CORPUS_DOCS=%q: want a page count (0: all)", v)
		}
	}
	ctx := context.Background()
	all, err := CorpusDocs(ctx, DefaultSitesTSV)
	if err != nil {
		b.Fatal(err)
	}
	docs := all
	if n > 0 && n < len(all) {
		docs = make([]Doc, 0, n)
		for i := range n {
			docs = append(docs, all[i*len(all)/n])
		}
	}
	loadDictionaries()
	var cpu time.Duration
	for b.Loop() {
		s, err := OpenSou(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		before := processCPU(b)
		if err := s.AddAll(ctx, docs); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU(b) - before
	}
	pages := float64(len(docs)) * float64(b.N)
	b.ReportMetric(pages/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(cpu.Microseconds())/pages, "cpu-µs/doc")
}

// processCPU is the user and system time this process has used.
func processCPU(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
