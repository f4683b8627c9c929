package node

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"
)

// The disk guard is the flood stage of Elasticsearch's disk watermarks for
// one node: when the free space of the data directory's file system falls
// below Config.MinFreeDisk, the node stops taking in anything that grows
// its store, before Badger meets ENOSPC (Badger mmaps its value log and
// memtables, and a write into a mapped page of a full file system is a
// SIGBUS, not an error). While the disk is low:
//   - the crawler fetches nothing (MayFetch is false for every host); its
//     frontier stays as it is, and responses already fetched are still
//     processed (at most one per fetch worker);
//   - URL batches from peers are refused with an error, so they stay in the
//     senders' durable outboxes and come back later;
//   - handed-off and replicated pages are refused the same way (the sender
//     keeps them until a Send succeeds);
//   - `sou crawl add` and POST /api/crawl answer 507 Insufficient Storage;
//   - search, the UI, status and the cached copies keep working.
//
// The guard resumes once free space is back above MinFreeDisk plus a
// margin (hysteresis, so that a disk at the edge does not flap).

// ErrDiskLow is returned for work refused while the disk is low.
var ErrDiskLow = errors.New("disk space low: the node has stopped taking in pages and URLs until space is freed")

// resumeMargin is how far above MinFreeDisk free space must climb before the
// node resumes.
const resumeMargin = 1.1

// diskCheckInterval: Badger writes at most a few memtables in that time,
// far below any sensible MinFreeDisk.
const diskCheckInterval = 2 * time.Second

type diskGuard struct {
	dir     string
	minFree uint64
	// free reports the bytes available to this process under dir
	// (statfs); tests replace it.
	free func(dir string) (uint64, error)

	low      atomic.Bool
	lastFree atomic.Uint64
}

func newDiskGuard(dir string, minFree uint64) *diskGuard {
	return &diskGuard{dir: dir, minFree: minFree, free: statfsFree}
}

func statfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// check measures free space and updates low; it reports a change.
func (g *diskGuard) check() (changed bool, free uint64, err error) {
	if g.minFree == 0 {
		return false, 0, nil
	}
	free, err = g.free(g.dir)
	if err != nil {
		return false, 0, err
	}
	g.lastFree.Store(free)
	wasLow := g.low.Load()
	switch {
	case !wasLow && free < g.minFree:
		g.low.Store(true)
		return true, free, nil
	case wasLow && float64(free) >= float64(g.minFree)*resumeMargin:
		g.low.Store(false)
		return true, free, nil
	}
	return false, free, nil
}

// Low reports whether the node has stopped taking in data.
func (g *diskGuard) Low() bool { return g.low.Load() }

// watchDisk runs the guard until ctx ends.
func (n *Node) watchDisk(ctx context.Context) {
	t := time.NewTicker(diskCheckInterval)
	defer t.Stop()
	for {
		n.checkDisk()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Node) checkDisk() {
	changed, free, err := n.disk.check()
	switch {
	case err != nil:
		n.errs.add("disk guard", err)
	case changed && n.disk.Low():
		err := fmt.Errorf("%w (%d MB free under %s, minimum %d MB)", ErrDiskLow, free>>20, n.cfg.DataDir, n.disk.minFree>>20)
		n.log.Error("disk space low: crawling and intake paused", "free_mb", free>>20, "min_free_mb", n.disk.minFree>>20, "dir", n.cfg.DataDir)
		n.errs.add("disk guard", err)
	case changed:
		n.log.Warn("disk space back: crawling and intake resumed", "free_mb", free>>20)
	}
}

// intakeOK is the check at every door through which data comes in.
func (n *Node) intakeOK() error {
	if n.disk.Low() {
		return ErrDiskLow
	}
	return nil
}
