package testnet

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"sou/node"
)

// A SIGKILL cannot help costing a refetch: a request in flight at that
// instant may have been answered by the web (which logs it as complete),
// but the process that would have stored the answer is gone, so the URL is
// fetched again or the page is lost. Every other duplicate fetch is a bug.
// The classifier below tells the two apart from the web's request log and
// the instants the launcher sent its SIGKILLs, instead of allowing a number
// of duplicates per kill.

// killRecord is one SIGKILL sent by the launcher: the address the node
// fetches from (its --source-ip), when the signal was sent, and when the
// restarted node began (zero if it was not restarted): the new process's
// own start, from its reported uptime, not the launcher's exec, because a
// process starting under load takes a while before it even runs Go code.
// Every request from that address that the web began to handle between the
// two was sent by the killed process: the web logs a request when its
// handler starts, which on a loaded machine can be well after the client
// sent it (CI: 239 ms after the kill, when the launcher's exec of the new
// process had come first).
type killRecord struct {
	Node   int
	Client string
	Sent   time.Time
	Back   time.Time
}

// killLog records the SIGKILLs of one run; the launcher's kill sites go
// through it.
type killLog struct {
	mu    sync.Mutex
	kills []killRecord
}

// kill SIGKILLs p and records when.
func (k *killLog) kill(p *nodeProc) {
	sent := time.Now()
	p.kill()
	k.mu.Lock()
	k.kills = append(k.kills, killRecord{Node: p.Index, Client: p.IP, Sent: sent})
	k.mu.Unlock()
}

// restart starts the killed p again and records when its new process
// began.
func (k *killLog) restart(ctx context.Context, p *nodeProc, bootstrap []string) error {
	k.mu.Lock()
	last := -1
	for i := len(k.kills) - 1; i >= 0; i-- {
		if k.kills[i].Node == p.Index {
			last = i
			k.kills[i].Back = time.Now()
			break
		}
	}
	k.mu.Unlock()
	if err := p.restart(ctx, bootstrap); err != nil {
		return err
	}
	k.mu.Lock()
	if last >= 0 && p.StartedAt.After(k.kills[last].Back) {
		k.kills[last].Back = p.StartedAt
	}
	k.mu.Unlock()
	return nil
}

func (k *killLog) list() []killRecord {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]killRecord(nil), k.kills...)
}

// settleBound is how long after the web finished a response the fetch may
// still be unsettled at the node that made it, so that a SIGKILL within it
// may cost a refetch. A fetch is settled for the node itself once its
// fetch transaction is in Badger (a restart processes it from there), and
// for the replica that would take its host over once the replica holds
// it: the page has been parsed and stored, and the replica acknowledged
// it or the wait gave up (node.ReplicaWaitMax, 0.5 s, after the
// node.ReplicaLinger its records may wait in the outbox for company when
// Store returned first). The bound is those plus 2.5 s for the responses
// ahead of it: the crawler's
// admission credits keep the responses waiting for processing to a few
// per processing worker, but on a machine loaded enough a page still takes
// a second or more to parse and store, and the bound only has to be an
// upper one (a duplicate it calls in flight is still counted).
const settleBound = node.ReplicaWaitMax + node.ReplicaLinger + 2500*time.Millisecond

// duplicateClasses splits the duplicate fetches of a run.
type duplicateClasses struct {
	// InFlight counts duplicates whose earlier fetch was made by a node
	// SIGKILLed between that request's start and settleBound after its
	// response completed.
	InFlight int
	// Avoidable counts every other duplicate.
	Avoidable int
	// InFlightMaxPerKill is the most in-flight duplicates one kill caused.
	InFlightMaxPerKill int
	// LagMax is the longest time from a response's completion to the kill
	// that orphaned it, among the in-flight duplicates (negative when every
	// such kill came before the response completed).
	LagMax time.Duration
	// AvoidableExamples describe (up to 20) avoidable duplicates.
	AvoidableExamples []string
}

// classifyDuplicates classifies each duplicate fetch (a final response to a
// URL that already had one, as crawlChecks counts them) by the final fetch
// before it: in flight at a kill when the node that made it was killed
// after sending it (the web began handling it before the node was started
// again) and before bound after the response completed.
func classifyDuplicates(fetches []fetch, kills []killRecord, bound time.Duration) duplicateClasses {
	var c duplicateClasses
	var first time.Time
	byURL := map[string][]fetch{}
	for _, f := range fetches {
		if first.IsZero() || f.Start.Before(first) {
			first = f.Start
		}
		if f.Path == "/robots.txt" || !f.final() {
			continue
		}
		byURL[f.URL] = append(byURL[f.URL], f)
	}
	rel := func(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(first).Seconds()) }
	perKill := make([]int, len(kills))
	lagSeen := false
	var examples []string
	for u, fs := range byURL {
		if len(fs) < 2 {
			continue
		}
		sort.Slice(fs, func(i, j int) bool { return fs[i].Start.Before(fs[j].Start) })
		for i := 1; i < len(fs); i++ {
			prev := fs[i-1]
			killed := -1
			for k, kr := range kills {
				sentBefore := kr.Back.IsZero() || !kr.Back.Before(prev.Start)
				if kr.Client == prev.Client && sentBefore && !kr.Sent.After(prev.End.Add(bound)) {
					killed = k
					break
				}
			}
			if killed >= 0 {
				c.InFlight++
				perKill[killed]++
				if lag := kills[killed].Sent.Sub(prev.End); !lagSeen || lag > c.LagMax {
					c.LagMax, lagSeen = lag, true
				}
				continue
			}
			c.Avoidable++
			examples = append(examples, fmt.Sprintf("%s: by %s at %s–%s, again by %s at %s%s",
				u, prev.Client, rel(prev.Start), rel(prev.End), fs[i].Client, rel(fs[i].Start), nearestKill(kills, prev, rel)))
		}
	}
	for _, n := range perKill {
		c.InFlightMaxPerKill = max(c.InFlightMaxPerKill, n)
	}
	c.AvoidableExamples = firstSorted(examples, 20)
	return c
}

// nearestKill names the kill of prev's node closest to prev's response, to
// explain an avoidable duplicate.
func nearestKill(kills []killRecord, prev fetch, rel func(time.Time) string) string {
	best := -1
	var bestGap time.Duration
	for k, kr := range kills {
		if kr.Client != prev.Client {
			continue
		}
		gap := kr.Sent.Sub(prev.End)
		if gap < 0 {
			gap = -gap
		}
		if best < 0 || gap < bestGap {
			best, bestGap = k, gap
		}
	}
	if best < 0 {
		return "; that node was never killed"
	}
	return fmt.Sprintf("; nearest kill of that node at %s", rel(kills[best].Sent))
}
