package placement

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Event is what the caller tells the machine: a membership change, an
// outcome of an action it ran, a message a peer sent, or the clock.
type Event interface{ event() }

// Tick is the clock going on: waits end, scans run.
type Tick struct{}

// Joined: a member joined this node's view. Holding are the members
// whose last heartbeat announced a host: a joiner awaits manifests only
// from donors among them.
type Joined struct {
	Peer    peer.ID
	Holding []peer.ID
}

// Left: a member left this node's view (it said so, or fell silent).
type Left struct{ Peer peer.ID }

// Hosts lists the hosts the crawler holds now (answers ListHosts; the
// caller also sends it before a membership change).
type Hosts struct{ Hosts []string }

// Manifest: From is about to hand this node Hosts (already authorised by
// Allowed(KindHandoff, ...)).
type Manifest struct {
	From  peer.ID
	Hosts []string
}

// HandedIn: the crawl state of Host arrived from From and was imported.
type HandedIn struct {
	Host string
	From peer.ID
}

// HandedOff ends a HandOff (To set) or an Abandon (To empty): Err is nil
// once the new owner acknowledged the pages and the crawl state (or the
// queued URLs, for an Abandon) and the crawler dropped the host; Refused
// says the new owner answered that it takes none of it from this node.
type HandedOff struct {
	Host    string
	To      peer.ID
	Err     error
	Refused bool
}

// ReplicaStored: items of Host from one of its holders were stored here.
type ReplicaStored struct{ Host string }

// Hinted: From, a holder of Hosts, says this node now holds them too
// (authorised by Allowed(KindReplica, ...)).
type Hinted struct {
	From  peer.ID
	Hosts []string
}

// Pulled ends a Pull: every member asked answered or timed out.
type Pulled struct{ Host string }

// TookOver ends a TakeOver.
type TookOver struct {
	Host string
	Err  error
}

// Await starts the wait of an item stored for Host (a page, a fetch
// marker) for its replicas: Pending are the outbox sequence numbers of
// the item for each target Targets said to wait for. After a Copy it
// adds the stand-in's. Grace lengthens the wait beyond WaitMax before a
// target is suspected: an item appended without urgency lingers in the
// outbox for company that long before it is sent.
type Await struct {
	ID      uint64
	Host    string
	Pending map[peer.ID]uint64
	Grace   time.Duration
}

// Delivered: the replica outbox of Peer delivered (and deleted) every
// item up to Seq.
type Delivered struct {
	Peer peer.ID
	Seq  uint64
}

// Undelivered: a delivery to Peer failed; it is suspected until one
// succeeds.
type Undelivered struct{ Peer peer.ID }

// OutboxHeld lists, at start, the peers the replica outbox still holds
// items for.
type OutboxHeld struct{ Peers []peer.ID }

func (Tick) event()          {}
func (Joined) event()        {}
func (Left) event()          {}
func (Hosts) event()         {}
func (Manifest) event()      {}
func (HandedIn) event()      {}
func (HandedOff) event()     {}
func (ReplicaStored) event() {}
func (Hinted) event()        {}
func (Pulled) event()        {}
func (TookOver) event()      {}
func (Await) event()         {}
func (Delivered) event()     {}
func (Undelivered) event()   {}
func (OutboxHeld) event()    {}

// Action is what the machine asks the caller to do. Actions that end
// report back with the event named in their comment.
type Action interface{ action() }

// SaveMember keeps (In) or forgets a member in Saved.Members.
type SaveMember struct {
	Peer peer.ID
	In   bool
}

// SaveFounder adds a founder to Saved.Founders.
type SaveFounder struct{ Peer peer.ID }

// SaveHost sets the role of a host in Saved (None deletes it).
type SaveHost struct {
	Host string
	Role Role
}

// ListHosts asks for the crawler's hosts (answer: Hosts).
type ListHosts struct{}

// SendManifest tells a joiner which hosts this node is about to hand it
// (possibly none). Fire and forget.
type SendManifest struct {
	To    peer.ID
	Hosts []string
}

// HandOff moves Host to its new owner: its stored pages, then its crawl
// state; the crawler drops the host once both were acknowledged (answer:
// HandedOff). Pages stay until ForgetHost.
type HandOff struct {
	Host string
	To   peer.ID
}

// Abandon drops the crawl state of a host this node does not own and
// cannot hand off, after passing the URLs queued for it to the owner as
// links, or one URL of it when Refused and none is queued, so that the
// owner hears of the host (answer: HandedOff). Its pages stay for the
// owner's pull.
// Refused says its owner refused its handoff for HandoffGiveUp; else it
// was never crawled here.
type Abandon struct {
	Host    string
	Refused bool
}

// ForgetHost deletes the stored pages of a host this node no longer holds.
type ForgetHost struct{ Host string }

// Hint tells a member that it now holds Hosts, so that it pulls them from
// this node. Fire and forget.
type Hint struct {
	To    peer.ID
	Hosts []string
}

// Pull asks each of From for what it holds of Host and this node does not
// (answer: Pulled, once each answered or PullTimeout passed).
type Pull struct {
	Host string
	From []peer.ID
}

// TakeOver makes a host held as a replica this node's to crawl: its
// stored pages and the fetch markers and sitemaps kept for it are marked
// fetched, the links of the pages queued again (answer: TookOver).
type TakeOver struct{ Host string }

// Release ends an Await; Missed are the replicas that did not acknowledge
// in time (their items stay in the outbox).
type Release struct {
	ID     uint64
	Missed []peer.ID
}

// Copy puts the item an Await waits for into the outbox of To, a stand-in
// for a replica that missed it (answer: Await with the same ID).
type Copy struct {
	ID uint64
	To peer.ID
}

// DropOutbox deletes the replica outbox of a peer gone longer than
// KeepAway.
type DropOutbox struct{ Peer peer.ID }

func (SaveMember) action()   {}
func (SaveFounder) action()  {}
func (SaveHost) action()     {}
func (ListHosts) action()    {}
func (SendManifest) action() {}
func (HandOff) action()      {}
func (Abandon) action()      {}
func (ForgetHost) action()   {}
func (Hint) action()         {}
func (Pull) action()         {}
func (TakeOver) action()     {}
func (Release) action()      {}
func (Copy) action()         {}
func (DropOutbox) action()   {}
