package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/maestro-aws/maestro/engine/dbtest"
	"github.com/maestro-aws/maestro/engine/definition"
	"github.com/maestro-aws/maestro/engine/execution"
	"github.com/maestro-aws/maestro/engine/stepruntime/httpstep"
)

// Issue 18, self-fencing: an engine stops all step work the moment its
// lease on a group may have run out by its own clock, before any database
// answer tells it so. The proof is a server every Http step calls: on each
// request it looks up which node owns the run's flow group at that moment,
// and a request from any other node is a call by a stale engine.

// fenceServer records each call and whether its sender owned the run's
// group when the call arrived.
type fenceServer struct {
	pool   *pgxpool.Pool
	mu     sync.Mutex
	byNode map[string]int
	stale  []string
	// perSecond counts calls by node and second since the server started.
	started   time.Time
	perSecond map[string]map[int]int
}

func (s *fenceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	node := r.Header.Get(httpstep.NodeHeader)
	iid, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/call/"), 10, 64)
	var owner string
	err := s.pool.QueryRow(r.Context(), `SELECT COALESCE(g.owner, '') FROM workflow_instance w
        JOIN flow_group g ON g.group_id = w.group_id WHERE w.workflow_id = 'fence' AND w.instance_id = $1`, iid).Scan(&owner)
	s.mu.Lock()
	s.byNode[node]++
	if s.perSecond[node] == nil {
		s.perSecond[node] = map[int]int{}
	}
	s.perSecond[node][int(time.Since(s.started).Seconds())]++
	if err != nil || owner != node {
		s.stale = append(s.stale, fmt.Sprintf("%s called for run %d at %s while %q owned its group (%v)",
			node, iid, time.Now().Format("15:04:05.000"), owner, err))
	}
	s.mu.Unlock()
	_, _ = io.WriteString(w, `{"ok": true}`)
}

func (s *fenceServer) report(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("calls by node: %v; by second: %v", s.byNode, s.perSecond)
	for _, v := range s.stale {
		t.Errorf("stale call: %s", v)
	}
}

// fenceFixture pushes a chain of Http steps; startFenceRuns starts runs of
// it, spread over 16 groups.
func fenceFixture(t *testing.T, dsn string, steps int) (*fenceServer, *killFixture) {
	t.Helper()
	pool := openPool(t, dsn)
	srv := &fenceServer{pool: pool, byNode: map[string]int{}, started: time.Now(), perSecond: map[string]map[int]int{}}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	// A call whose answer a takeover lost fails its attempt as a platform
	// error; the retry comes a second later, not Maestro's default minute.
	def := chainDefinition("fence", `{"owner":"tester","run_strategy":"PARALLEL"}`, steps, func(int) string {
		return `"type":"Http","retry_policy":{"backoff":{"type":"FIXED_BACKOFF","platform_retry_backoff_in_secs":1}},
		  "params":{"http":{"type":"MAP","value":{"url":{"type":"STRING","value":"` + ts.URL + `/call/${workflow_instance_id}"}}}}`
	})
	defs := definition.NewStore(pool)
	pushDefinitions(t, defs, def)
	return srv, &killFixture{pool: pool, runs: execution.New(pool, defs, 16), workflowID: "fence"}
}

// startFenceRuns starts n runs once both engines hold their share: started
// earlier, one engine could run every step before the other held a group
// (a loaded CI machine did), and there would be no call of the other to
// fence.
func startFenceRuns(t *testing.T, f *killFixture, n int) {
	t.Helper()
	for range n {
		res, err := f.runs.Start(context.Background(), execution.StartRequest{WorkflowID: "fence", Version: "latest"})
		if err != nil {
			t.Fatal(err)
		}
		f.insts = append(f.insts, res.Instance)
	}
}

// SIGSTOP one of two engines for longer than its lease; the other takes
// all of its groups over; SIGCONT it. The resumed engine makes no call for
// a group it no longer owns (it gives its groups up by its own clock before
// its actors go on), rejoins, and every run finishes.
func TestPausedEngineMakesNoCallAfterItsLease(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	dsn := dbtest.URL(t)
	srv, f := fenceFixture(t, dsn, 40)
	env := []string{"MAESTRO_GROUP_COUNT=16", "MAESTRO_LEASE=" + lease.String()}
	a := engineProcess(t, dsn, "node-a", "0", env...)
	b := engineProcess(t, dsn, "node-b", "0", env...)
	waitOwnedWithin(t, srv.pool, map[string]int{"node-a": 8, "node-b": 8}, 4*lease)
	startFenceRuns(t, f, 16)
	waitCalls(t, srv, 30, "node-a", "node-b")

	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitOwnedWithin(t, srv.pool, map[string]int{"node-b": 16}, 4*lease)
	time.Sleep(500 * time.Millisecond) // node-b's calls for the taken runs are under way
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	f.checkAllSucceeded(t, 2*time.Minute)
	srv.report(t)
	assertRunning(t, a, b)
}

// stallProxy forwards TCP connections to target until it is stalled: then
// it stops passing the server's replies on without closing anything, as a
// one-way partition or a hung network path does. The client's statements
// still reach the server and commit; the client just never hears back.
type stallProxy struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go p.serve()
	return p
}

func (p *stallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				return
			}
			go p.pipe(up, c, false)
			p.pipe(c, up, true)
		}()
	}
}

func (p *stallProxy) pipe(dst, src net.Conn, stalls bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for stalls && p.stalled.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// The database stops answering one of two engines: its statements still
// commit, but no reply and no error comes back. It gives its groups up by
// its own clock, the other takes them over, and when the replies flow
// again (the intents it recorded are "confirmed" long after they
// committed) the cut-off engine makes no call for a group it no longer
// owns. Only the lease check by the node's own clock stops those calls:
// the database accepted every write it made.
func TestEngineCutOffFromTheDatabaseMakesNoCallAfterItsLease(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	dsn := dbtest.URL(t)
	srv, f := fenceFixture(t, dsn, 40)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newStallProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.ln.Addr().String()
	env := []string{"MAESTRO_GROUP_COUNT=16", "MAESTRO_LEASE=" + lease.String()}
	a := engineProcess(t, viaProxy.String(), "node-a", "0", env...)
	b := engineProcess(t, dsn, "node-b", "0", env...)
	waitOwnedWithin(t, srv.pool, map[string]int{"node-a": 8, "node-b": 8}, 4*lease)
	startFenceRuns(t, f, 16)
	waitCalls(t, srv, 30, "node-a", "node-b")

	proxy.stalled.Store(true)
	waitOwnedWithin(t, srv.pool, map[string]int{"node-b": 16}, 4*lease)
	time.Sleep(500 * time.Millisecond)
	proxy.stalled.Store(false)
	f.checkAllSucceeded(t, 2*time.Minute)
	srv.report(t)
	assertRunning(t, a, b)
}

// waitCalls waits until each node has made n calls.
func waitCalls(t *testing.T, srv *fenceServer, n int, nodes ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		srv.mu.Lock()
		done := true
		for _, node := range nodes {
			done = done && srv.byNode[node] >= n
		}
		seen := maps.Clone(srv.byNode)
		srv.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls by node %v, want %d from each of %v", seen, n, nodes)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// assertRunning fails the test for each process that has exited (a
// crashed engine, its survivor having finished the runs, would otherwise
// go unseen).
func assertRunning(t *testing.T, cmds ...*exec.Cmd) {
	t.Helper()
	for _, c := range cmds {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))
		// The state follows the command name in parentheses; Z is a process
		// that has exited and is not yet waited for.
		if i := strings.LastIndexByte(string(stat), ')'); err != nil || i < 0 || strings.HasPrefix(string(stat[i+1:]), " Z") {
			t.Errorf("engine process %d (%s) is no longer running", c.Process.Pid, strings.Join(c.Args, " "))
		}
	}
}
