package testnet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procSampler follows the node processes' memory and CPU from /proc while
// a testnet runs: the peak of anonymous and file-backed resident memory
// (RssAnon, RssFile: the Go heap and gojieba's dictionary are anonymous,
// Badger's mapped tables and value log file-backed) and the CPU time of
// every process a node ran as (a node restarted after a kill is a new
// process; its CPU adds up).
type procSampler struct {
	mu    sync.Mutex
	nodes map[int]*procFigures // by node index
	cpu   map[int]float64      // seconds, by pid, last seen
	pidOf map[int]int          // pid -> node index
}

// procFigures are one node's figures.
type procFigures struct {
	RSSPeakMB     float64 // anonymous plus file-backed
	RSSAnonPeakMB float64
	RSSFilePeakMB float64
	CPUSeconds    float64
}

func newProcSampler() *procSampler {
	return &procSampler{nodes: map[int]*procFigures{}, cpu: map[int]float64{}, pidOf: map[int]int{}}
}

// run samples the live nodes every interval until ctx ends.
func (s *procSampler) run(ctx context.Context, l *launcher, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.sample(l)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *procSampler) sample(l *launcher) {
	for _, p := range l.all() {
		pid := p.pid()
		if pid == 0 {
			continue
		}
		anon, file, err := RSSOf(pid)
		if err != nil {
			continue
		}
		cpu, err := CPUSecondsOf(pid)
		if err != nil {
			continue
		}
		s.mu.Lock()
		f := s.nodes[p.Index]
		if f == nil {
			f = &procFigures{}
			s.nodes[p.Index] = f
		}
		f.RSSPeakMB = max(f.RSSPeakMB, anon+file)
		f.RSSAnonPeakMB = max(f.RSSAnonPeakMB, anon)
		f.RSSFilePeakMB = max(f.RSSFilePeakMB, file)
		s.cpu[pid] = cpu
		s.pidOf[pid] = p.Index
		s.mu.Unlock()
	}
}

// figures returns each node's figures, CPU summed over its processes.
func (s *procSampler) figures() map[int]procFigures {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]procFigures{}
	for i, f := range s.nodes {
		out[i] = procFigures{RSSPeakMB: round3(f.RSSPeakMB), RSSAnonPeakMB: round3(f.RSSAnonPeakMB), RSSFilePeakMB: round3(f.RSSFilePeakMB)}
	}
	for pid, cpu := range s.cpu {
		i := s.pidOf[pid]
		f := out[i]
		f.CPUSeconds = round3(f.CPUSeconds + cpu)
		out[i] = f
	}
	return out
}

// RSSOf reads RssAnon and RssFile of pid, in MB.
func RSSOf(pid int) (anon, file float64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "RssAnon" && k != "RssFile") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		if k == "RssAnon" {
			anon = kb / 1024
		} else {
			file = kb / 1024
		}
	}
	return anon, file, sc.Err()
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// CPUSecondsOf reads the user and system CPU time of pid.
func CPUSecondsOf(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis are space-separated, utime and stime the 12th and
	// 13th of them.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, fields[11], fields[12])
	}
	return (utime + stime) / clockTicks, nil
}

// perNodeReport is the per_node array: each node's status at the end (if
// it answers), the web's requests from its address, its CPU at the end
// of the crawl (atCrawlEnd) and its memory peaks over the run (procs).
func perNodeReport(ctx context.Context, l *launcher, atCrawlEnd, procs map[int]procFigures, requests map[string]int) []NodeFigures {
	var out []NodeFigures
	for _, p := range l.all() {
		f := procs[p.Index]
		nf := NodeFigures{Node: p.Index, Peer: p.PeerID, WebRequests: requests[p.IP], CPUSeconds: atCrawlEnd[p.Index].CPUSeconds, RSSAnonPeakMB: f.RSSAnonPeakMB, RSSFilePeakMB: f.RSSFilePeakMB}
		if p.alive() {
			if st, err := p.status(ctx); err == nil {
				nf.HostsOwned, nf.PagesStored, nf.PagesHeld, nf.PostingsBytes = st.OwnedHosts, st.Index.Docs+int64(st.Index.Held), st.Index.Held, st.Index.PostingsBytes
				nf.PagesAnalysed, nf.FormsReplayed, nf.FormsRefused = st.Index.PutsAnalysed, st.Index.FormsReplayed, st.Index.FormsRefused
				nf.ClaimBatches, nf.ClaimsBatched = st.P2P.ClaimBatchesSent, st.P2P.ClaimsBatched
				nf.DeliveriesReceived, nf.SyncRounds = st.P2P.DeliveriesReceived, st.SyncRounds
				nf.StoresDetached = st.StoresDetached
				nf.AnchorUpdates = st.Index.AnchorUpdates
			}
		}
		out = append(out, nf)
	}
	return out
}

// selfCPUSeconds is the user and system CPU time of this process so far.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
