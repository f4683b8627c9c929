package testnet

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// resourceSampler samples the process's memory and goroutines while a
// simulation runs. The nodes share one process, so a node's share is the
// process's peak divided by the most nodes alive at once.
type resourceSampler struct {
	samples           int
	peakRSS, peakHeap uint64
	peakGoroutines    int
	maxNodes          int
}

func newResourceSampler() *resourceSampler { return &resourceSampler{} }

func (r *resourceSampler) run(ctx context.Context, liveNodes func() int) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		r.sample(liveNodes())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *resourceSampler) sample(nodes int) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss := processRSS()
	g := runtime.NumGoroutine()
	r.samples++
	r.peakRSS = max(r.peakRSS, rss)
	r.peakHeap = max(r.peakHeap, ms.HeapInuse)
	r.peakGoroutines = max(r.peakGoroutines, g)
	r.maxNodes = max(r.maxNodes, nodes)
}

// report fills the sampled fields of into (the Badger and CPU fields are
// the caller's).
func (r *resourceSampler) report(into SimResources) SimResources {
	const mb = 1 << 20
	into.Samples = r.samples
	into.PeakRSSMB = round3(float64(r.peakRSS) / mb)
	into.PeakHeapMB = round3(float64(r.peakHeap) / mb)
	into.PeakGoroutines = r.peakGoroutines
	// Peaks over the most nodes alive at once: a ratio taken at one
	// sample is inflated while the nodes are still starting.
	if n := float64(max(1, r.maxNodes)); r.maxNodes > 0 {
		into.RSSPerNodeMB = round3(float64(r.peakRSS) / mb / n)
		into.HeapPerNodeMB = round3(float64(r.peakHeap) / mb / n)
		into.GoroutinesPerNode = round3(float64(r.peakGoroutines) / n)
	}
	return into
}

// processRSS is the resident set size from /proc/self/status (0 when it
// cannot be read).
func processRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				kb, err := strconv.ParseUint(fields[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// processCPU is the process's user and system CPU time so far, in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
