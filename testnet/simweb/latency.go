package simweb

import (
	"encoding/binary"
	"hash/fnv"
	"net"
	"net/http"
	"time"
)

// LatencyMatrix returns a deterministic per-(client, host) latency in
// [lo, hi] for Config.Latency: the C_ij matrix of DSpider, the cost of
// crawler i fetching from site j. Half of it is the client's own distance
// (its access link, the same for every site), half the pair's (the route
// between them), both drawn uniformly from the seed, so some crawlers are
// closer to everything and some sites farther from everyone, as on the
// real internet, while the pairs still differ.
func LatencyMatrix(seed int64, lo, hi time.Duration) func(clientIP, vhost string) time.Duration {
	if hi < lo {
		lo, hi = hi, lo
	}
	span := float64(hi - lo)
	return func(clientIP, vhost string) time.Duration {
		own := unit(seed, clientIP, "")
		pair := unit(seed, clientIP, vhost)
		return lo + time.Duration(span*(own+pair)/2)
	}
}

// unit hashes (seed, a, b) to [0, 1).
func unit(seed int64, a, b string) float64 {
	h := fnv.New64a()
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], uint64(seed))
	h.Write(s[:])
	h.Write([]byte(a))
	h.Write([]byte{0})
	h.Write([]byte(b))
	// Mix the low bits up (FNV's high bits are weak for short inputs).
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return float64(x>>11) / (1 << 53)
}

// linkDelay waits Config.Latency for this request, if set, unless the
// request or the web ends first.
func (w *Web) linkDelay(r *http.Request, vhost string) error {
	if w.cfg.Latency == nil {
		return nil
	}
	client := r.RemoteAddr
	if h, _, err := net.SplitHostPort(client); err == nil {
		client = h
	}
	return w.sleep(r.Context(), w.cfg.Latency(client, vhost))
}
