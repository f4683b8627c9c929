package testnet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sou/node"
)

// nodeProc is one `sou node` process of a LAN testnet.
type nodeProc struct {
	Index   int
	IP      string
	HTTP    string // host:port of its API
	DataDir string
	PeerID  string
	Addrs   []string
	// StartedAt is no later than the moment the running process's node
	// began (its reported uptime, counted back from before the request):
	// it cannot have sent a request before then.
	StartedAt time.Time

	args     []string // baseArgs plus the current bootstrap peers
	baseArgs []string
	bin      string
	procs    int
	logPath  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	// stopping is set before the launcher kills or stops the process, so
	// that an exit without it counts as a crash.
	stopping atomic.Bool
	crashes  atomic.Int32
}

// launcher starts and stops the node processes of one testnet. Every
// address it uses is on loopback: node i listens on 127.R.S.(10+i) for both
// libp2p and HTTP, where R.S is random per testnet so that two testnets on
// one machine do not collide.
type launcher struct {
	bin      string
	root     string // data directories live under it
	network  string
	dns      string
	ipPrefix string
	// procs is every node's GOMAXPROCS (NodeProcs).
	procs int

	mu    sync.Mutex
	nodes []*nodeProc
}

func newLauncher(bin, root, dns string, procs int) *launcher {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	return &launcher{
		bin: bin, root: root, dns: dns, procs: procs,
		network:  fmt.Sprintf("testnet-%08x", r.Uint32()),
		ipPrefix: fmt.Sprintf("127.%d.%d.", 100+r.IntN(100), 1+r.IntN(250)),
	}
}

// start launches node index i and waits until its API answers, so that its
// peer ID and addresses are known for the nodes that follow.
func (l *launcher) start(ctx context.Context, i int, bootstrap []string) (*nodeProc, error) {
	ip := fmt.Sprintf("%s%d", l.ipPrefix, 10+i)
	p := &nodeProc{
		Index: i, IP: ip, HTTP: ip + ":7070", bin: l.bin, procs: l.procs,
		DataDir: filepath.Join(l.root, fmt.Sprintf("node-%02d", i)),
		logPath: filepath.Join(l.root, fmt.Sprintf("node-%02d.log", i)),
	}
	// Fixed ports on the node's own address: a node restarted after a
	// SIGKILL comes back at the same multiaddr (its identity key is in its
	// data directory), so the other nodes' peerstores stay right.
	p.baseArgs = []string{"node",
		"--data", p.DataDir, "--http", p.HTTP, "--network", l.network, "--dns", l.dns,
		"--listen", fmt.Sprintf("/ip4/%s/tcp/%d,/ip4/%s/udp/%d/quic-v1", ip, libp2pPort, ip, libp2pPort),
		"--mdns=false", "--fast", "--allow-loopback", "--source-ip", ip, "--log-level", nodeLogLevel(),
	}
	p.setBootstrap(bootstrap)
	if err := p.spawn(); err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, 60*time.Second); err != nil {
		p.kill()
		return nil, err
	}
	l.mu.Lock()
	l.nodes = append(l.nodes, p)
	l.mu.Unlock()
	return p, nil
}

func (p *nodeProc) spawn() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %d log: %w", p.Index, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = nodeEnv(os.Environ(), p.procs)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Own process group, and SIGKILL if the launcher itself dies, so a
	// testnet never leaves processes behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start node %d (%s): %w", p.Index, p.bin, err)
	}
	exited := make(chan struct{})
	p.stopping.Store(false)
	go func() {
		_ = cmd.Wait()
		logf.Close()
		if !p.stopping.Load() {
			p.crashes.Add(1)
		}
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	return nil
}

// NodeProcs is the GOMAXPROCS a testnet gives each of nodes node
// processes when it is not told one: the machine's cores shared among
// them, at least one each. A testnet stands for nodes on machines of
// their own; with every process scheduling the whole machine, each runs
// more threads than it has cores, and the runtime's idle-time collector
// work and spinning threads of one node take cores another node's work
// waits for.
func NodeProcs(nodes int) int {
	return max(1, runtime.NumCPU()/max(nodes, 1))
}

// nodeEnv is a node process's environment: the launcher's, with
// GOMAXPROCS set to procs (which wins over one inherited).
func nodeEnv(base []string, procs int) []string {
	env := make([]string, 0, len(base)+1)
	for _, kv := range base {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			env = append(env, kv)
		}
	}
	return append(env, fmt.Sprintf("GOMAXPROCS=%d", procs))
}

func (p *nodeProc) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		select {
		case <-exited:
			return fmt.Errorf("node %d exited at start; its log %s ends:\n%s", p.Index, p.logPath, tail(p.logPath, 15))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
		asked := time.Now()
		st, err := p.status(ctx)
		if err == nil {
			p.PeerID, p.Addrs = st.PeerID, st.Addrs
			p.StartedAt = asked.Add(-time.Duration(st.UptimeS * float64(time.Second)))
			return nil
		}
	}
	return fmt.Errorf("node %d did not answer on %s within %v; log %s:\n%s", p.Index, p.HTTP, limit, p.logPath, tail(p.logPath, 15))
}

var apiClient = &http.Client{Timeout: 10 * time.Second}

func (p *nodeProc) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+p.HTTP+path, nil)
	if err != nil {
		return nil, err
	}
	return apiClient.Do(req)
}

func (p *nodeProc) getJSON(ctx context.Context, path string, out any) error {
	resp, err := p.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (p *nodeProc) postJSON(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+p.HTTP+path, strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := apiClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}

func (p *nodeProc) status(ctx context.Context) (*node.Status, error) {
	var st node.Status
	if err := p.getJSON(ctx, "/api/status", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// pid is the running process's ID, 0 when none runs.
func (p *nodeProc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	select {
	case <-p.exited:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// alive reports whether the process is running.
func (p *nodeProc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the node's process group and waits for it to go.
func (p *nodeProc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	p.stopping.Store(true)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// stop asks the node to shut down cleanly (SIGTERM), then kills it after
// grace.
func (p *nodeProc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	p.stopping.Store(true)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		p.kill()
	}
}

// libp2pPort is every testnet node's libp2p port (TCP and QUIC), on its
// own loopback address.
const libp2pPort = 4001

func (p *nodeProc) setBootstrap(addrs []string) {
	p.args = append([]string(nil), p.baseArgs...)
	if len(addrs) > 0 {
		p.args = append(p.args, "--bootstrap", strings.Join(addrs, ","))
	}
}

// restart starts a killed node again on the same data directory and
// addresses, bootstrapped to the nodes alive now.
func (p *nodeProc) restart(ctx context.Context, bootstrap []string) error {
	if p.alive() {
		return errors.New("node is running")
	}
	p.setBootstrap(bootstrap)
	if err := p.spawn(); err != nil {
		return err
	}
	return p.waitReady(ctx, 60*time.Second)
}

// stopAll stops every node; it is safe to call more than once.
func (l *launcher) stopAll() {
	l.mu.Lock()
	nodes := append([]*nodeProc(nil), l.nodes...)
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(10 * time.Second) }()
	}
	wg.Wait()
}

func (l *launcher) all() []*nodeProc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*nodeProc(nil), l.nodes...)
}

func (l *launcher) live() []*nodeProc {
	var out []*nodeProc
	for _, p := range l.all() {
		if p.alive() {
			out = append(out, p)
		}
	}
	return out
}

// bootstrapAddrs returns the libp2p addresses of the live nodes.
func (l *launcher) bootstrapAddrs() []string {
	var out []string
	for _, p := range l.live() {
		for _, a := range p.Addrs {
			if strings.Contains(a, "/tcp/") {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// nodeLogLevel is the nodes' log level: warn, or SOU_TESTNET_LOG_LEVEL.
func nodeLogLevel() string {
	if l := os.Getenv("SOU_TESTNET_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}
