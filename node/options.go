package node

import (
	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/libp2p/go-libp2p/core/host"

	"sou/crawl"
	"sou/p2p"
	"sou/placement"
)

// nodeOptions are New's optional settings; the zero value is a node of the
// real network (its own libp2p host, Badger on disk under Config.DataDir).
type nodeOptions struct {
	host      host.Host
	inMemory  bool
	crawlTune func(*crawl.Config)
	p2pTune   func(*p2p.Config)
	placeTune func(*placement.Config)
}

// Option customises New.
type Option func(*nodeOptions)

// WithHost makes the node run on an existing libp2p host, for example a
// mocknet host in the WAN simulator. The caller keeps ownership of the
// host: the node does not close it. Config.Listen, PSKFile and the identity
// key in DataDir are then the host's business.
func WithHost(h host.Host) Option { return func(o *nodeOptions) { o.host = h } }

// WithInMemoryStore keeps the node's Badger database in memory
// (InMemoryBadgerOptions) instead of under DataDir: nothing survives the
// process, which is what the WAN simulator wants for hundreds of nodes in
// one process. DataDir must still be set (Validate) but is not written.
func WithInMemoryStore() Option { return func(o *nodeOptions) { o.inMemory = true } }

// WithCrawlConfig lets the caller adjust the crawler's configuration after
// New has derived it from Config (the WAN simulator uses the real web's
// fetch timeouts instead of the LAN testnet's).
func WithCrawlConfig(tune func(*crawl.Config)) Option {
	return func(o *nodeOptions) { o.crawlTune = tune }
}

// WithP2PConfig lets the caller adjust the p2p configuration after New has
// derived it from Config (the WAN simulator stretches the membership
// heartbeat with the number of nodes sharing its one process).
func WithP2PConfig(tune func(*p2p.Config)) Option {
	return func(o *nodeOptions) { o.p2pTune = tune }
}

// WithPlacementConfig lets the caller adjust placement's configuration
// after New has derived it from Config (tests shorten its waits).
func WithPlacementConfig(tune func(*placement.Config)) Option {
	return func(o *nodeOptions) { o.placeTune = tune }
}

// InMemoryBadgerOptions are a simulated node's Badger settings: in memory,
// small memtables and caches and no compression, so that a few hundred
// nodes with a few thousand pages each fit in a few GB and do not spend
// the machine's two cores on ZSTD.
func InMemoryBadgerOptions() badger.Options {
	return badger.DefaultOptions("").
		WithInMemory(true).
		WithLogger(nil).
		// 8 MB: a transaction may hold 15% of a memtable, and a handoff
		// or a page with its cached copy must fit in one.
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBaseTableSize(1 << 20).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		WithCompression(options.None).
		WithNumCompactors(2).
		WithDetectConflicts(false)
}
