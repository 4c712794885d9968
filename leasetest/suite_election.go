// Election subtests of the conformance suite: Campaign, Leader, Resign and
// Observe over the store; a leader whose renewals stall loses to another
// candidate (its Run function's context cancelled before the successor's
// starts) and campaigns again.

package leasetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/election"
)

// newElection returns a candidate with identity id, failing the test on error.
func (e *env) newElection(c *lease.Client, key, id string, opts ...election.Option) *election.Election {
	e.t.Helper()
	el, err := election.New(c, key, append([]election.Option{election.WithIdentity(id)}, opts...)...)
	if err != nil {
		e.t.Fatalf("election.New: %v", err)
	}
	return el
}

// observed collects what an Observe channel delivers.
type observed struct {
	mu      sync.Mutex
	leaders []election.Leader
	changed chan struct{}
	done    chan struct{}
}

// observe starts collecting el.Observe until the returned cancel is called
// (also at cleanup).
func (e *env) observe(el *election.Election) (*observed, context.CancelFunc) {
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(cancel)
	o := &observed{changed: make(chan struct{}), done: make(chan struct{})}
	ch := el.Observe(ctx)
	go func() {
		defer close(o.done)
		for l := range ch {
			o.mu.Lock()
			o.leaders = append(o.leaders, l)
			close(o.changed)
			o.changed = make(chan struct{})
			o.mu.Unlock()
		}
	}()
	return o, func() {
		cancel()
		select {
		case <-o.done:
		case <-time.After(closeWait):
			e.t.Errorf("the Observe channel was not closed within %v of its ctx ending", closeWait)
		}
	}
}

// waitFor waits up to d for a delivered leader with fence f.
func (o *observed) waitFor(f uint64, d time.Duration) bool {
	return o.waitUntil(func(l election.Leader) bool { return l.Fence == f }, d)
}

// waitForAtLeast waits up to d for a delivered leader with a fence of at
// least f.
func (o *observed) waitForAtLeast(f uint64, d time.Duration) bool {
	return o.waitUntil(func(l election.Leader) bool { return l.Fence >= f }, d)
}

// waitUntil waits up to d for a delivered leader (held) that ok accepts.
func (o *observed) waitUntil(ok func(election.Leader) bool, d time.Duration) bool {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		for _, l := range o.leaders {
			if l.Held && ok(l) {
				o.mu.Unlock()
				return true
			}
		}
		ch := o.changed
		o.mu.Unlock()
		select {
		case <-ch:
		case <-timeout.C:
			return false
		}
	}
}

// checkObservedAmong verifies that the leaders delivered are terms that
// started, in their order, including the first must terms and at least one
// after them: Observe polls, so it may miss a term lost at once.
func (e *env) checkObservedAmong(o *observed, terms []election.Leader, must int) {
	e.t.Helper()
	o.mu.Lock()
	got := append([]election.Leader(nil), o.leaders...)
	o.mu.Unlock()
	i, seen := 0, 0
	for _, l := range got {
		if !l.Held {
			continue
		}
		for i < len(terms) && (terms[i].Fence != l.Fence || l.Identity != "" && l.Identity != terms[i].Identity) {
			if i < must {
				break
			}
			i++
		}
		if i == len(terms) || terms[i].Fence != l.Fence {
			e.t.Errorf("Observe delivered %+v, not one of the terms %+v in their order", got, terms)
			return
		}
		i++
		seen = i
	}
	if seen <= must {
		e.t.Errorf("Observe delivered %+v, want the terms %+v in order, through one after the first %d", got, terms, must)
	}
	e.t.Logf("Observe delivered %+v", got)
}

// check verifies that the leaders delivered are exactly want (identity and
// fence, in order), with vacancies anywhere between them.
func (e *env) checkObserved(o *observed, want []election.Leader) {
	e.t.Helper()
	o.mu.Lock()
	got := append([]election.Leader(nil), o.leaders...)
	o.mu.Unlock()
	var held []election.Leader
	for i, l := range got {
		if i > 0 && !l.Held && !got[i-1].Held {
			e.t.Errorf("Observe delivered two vacancies in a row: %+v", got)
		}
		if l.Held {
			held = append(held, l)
		}
	}
	ok := len(held) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = held[i].Fence == want[i].Fence && (held[i].Identity == "" || held[i].Identity == want[i].Identity)
	}
	if !ok {
		e.t.Errorf("Observe delivered leaders %+v, want %+v in this order (with vacancies between)", got, want)
	}
	e.t.Logf("Observe delivered %+v", got)
}

// testElectionBasics: Campaign, Leader, Resign, a waiting candidate taking
// over after a resignation, Observe, and Campaign's prompt ErrClosed.
func testElectionBasics(e *env) {
	c1, c2, c3 := e.client(e.store()), e.client(e.store()), e.client(e.store())
	key := e.key("election")
	e1 := e.newElection(c1, key, "cand-1")
	e2 := e.newElection(c2, key, "cand-2", election.WithTTL(4*e.ttl))
	e3 := e.newElection(c3, key, "cand-3")

	if ld, err := e1.Leader(e.ctx); err != nil || ld.Held {
		e.t.Fatalf("Leader of a new election: %+v, %v; want vacant", ld, err)
	}
	o, stopObserving := e.observe(e3)
	l1, err := e1.Campaign(e.ctx)
	if err != nil {
		e.t.Fatalf("Campaign: %v", err)
	}
	if again, err := e1.Campaign(e.ctx); err != nil || again != l1 {
		e.t.Errorf("Campaign while leading: %v, %v; want the current lease", again, err)
	}
	if e1.Lease() != l1 || e2.Lease() != nil {
		e.t.Errorf("Lease() = %v and %v, want the leader's lease and nil", e1.Lease(), e2.Lease())
	}
	ld, err := e2.Leader(e.ctx)
	if err != nil {
		e.t.Fatalf("Leader: %v", err)
	}
	if !ld.Held || ld.Fence != l1.Fence() || (ld.Identity != "" && ld.Identity != "cand-1") || ld.Remaining > e.ttl {
		e.t.Errorf("Leader = %+v, want held by cand-1 with fence %d and at most %v left", ld, l1.Fence(), e.ttl)
	}
	if err := e2.Resign(e.ctx); !errors.Is(err, election.ErrNotLeader) {
		e.t.Errorf("Resign of a follower: %v, want ErrNotLeader", err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, e.ttl/2)
	if l, err := e2.Campaign(ctx); !errors.Is(err, context.DeadlineExceeded) {
		e.t.Errorf("Campaign with a %v timeout while another leads: %v, %v; want DeadlineExceeded", e.ttl/2, l, err)
	}
	cancel()

	// A waiting candidate takes over when the leader resigns.
	ch := make(chan acquired, 1)
	go func() {
		l, err := e2.Campaign(e.ctx)
		ch <- acquired{l, err, time.Now()}
	}()
	e.sleep(e.ttl / 4)
	if !o.waitFor(l1.Fence(), 2*e.ttl) {
		e.t.Errorf("Observe did not deliver the first leader within %v", 2*e.ttl)
	}
	resigned := time.Now()
	if err := e1.Resign(e.ctx); err != nil {
		e.t.Fatalf("Resign: %v", err)
	}
	if err := l1.Err(); !errors.Is(err, lease.ErrReleased) {
		e.t.Errorf("resigned lease's Err() = %v, want ErrReleased", err)
	}
	if err := e1.Resign(e.ctx); !errors.Is(err, election.ErrNotLeader) {
		e.t.Errorf("second Resign: %v, want ErrNotLeader", err)
	}
	_, notifier := e.store().(driver.Notifier)
	bound := e.ttl + e.ttl + time.Second
	if notifier {
		bound = e.ttl
	}
	r := e.await(ch, bound+time.Second)
	if r.err != nil {
		e.t.Fatalf("waiting Campaign: %v", r.err)
	}
	e.t.Logf("the waiting candidate led %v after the resignation (store is a Notifier: %v)", r.at.Sub(resigned).Round(time.Millisecond), notifier)
	if d := r.at.Sub(resigned); d > bound {
		e.t.Errorf("the waiting candidate led %v after the resignation, want within %v", d, bound)
	}
	l2 := r.l
	if l2.Fence() <= l1.Fence() {
		e.t.Errorf("new leader's fence %d, want > %d", l2.Fence(), l1.Fence())
	}
	if !o.waitFor(l2.Fence(), 2*e.ttl) {
		e.t.Errorf("Observe did not deliver the second leader within %v", 2*e.ttl)
	}
	if ld, err := e1.Leader(e.ctx); err != nil || !ld.Held || ld.Fence != l2.Fence() {
		e.t.Errorf("Leader after the hand-over: %+v, %v; want fence %d", ld, err, l2.Fence())
	}
	stopObserving()
	e.checkObserved(o, []election.Leader{{Identity: "cand-1", Fence: l1.Fence()}, {Identity: "cand-2", Fence: l2.Fence()}})

	// A candidate waiting for a long lease returns promptly when its Client closes.
	ch = make(chan acquired, 1)
	go func() {
		l, err := e3.Campaign(e.ctx)
		ch <- acquired{l, err, time.Now()}
	}()
	e.sleep(e.ttl / 4)
	closing := time.Now()
	if err := c3.Close(); err != nil {
		e.t.Errorf("Close: %v", err)
	}
	r = e.await(ch, 4*e.ttl)
	if !errors.Is(r.err, lease.ErrClosed) {
		e.t.Errorf("Campaign when the Client closed: %v, %v; want ErrClosed", r.l, r.err)
	}
	if d := r.at.Sub(closing); d > 2*e.ttl {
		e.t.Errorf("Campaign returned %v after Close, want promptly (the leader's TTL is %v)", d, 4*e.ttl)
	}
	if err := e2.Resign(e.ctx); err != nil {
		e.t.Errorf("Resign: %v", err)
	}
}

// term is one leadership term seen by a Run function.
type term struct {
	identity string
	fence    uint64
	started  time.Time
	// prevCancelled: when the term started, the leaderCtx of the other
	// candidate's last term was already cancelled (or there was none).
	prevCancelled bool
	cause         error // context.Cause(leaderCtx) once cancelled
}

// testElectionFailover: a leader whose renewals stall loses leadership; its
// Run function's context is cancelled before the other candidate's function
// starts; the successor's fence is larger; the old leader campaigns again
// and leads once the successor stops; Observe sees all three terms in order.
func testElectionFailover(e *env) {
	fs := e.faulty()
	ca, cb, co := e.client(fs), e.client(e.store()), e.client(e.store())
	key := e.key("failover")
	ea := e.newElection(ca, key, "cand-a")
	eb := e.newElection(cb, key, "cand-b")
	o, stopObserving := e.observe(e.newElection(co, key, "observer"))

	var mu sync.Mutex
	lastCtx := map[string]context.Context{} // each candidate's last leaderCtx
	started := make(chan term, 8)
	ended := make(chan term, 8)
	bLeads := make(chan struct{})
	bStop := make(chan struct{})
	aTerms := 0
	runFn := func(id, other string) func(context.Context) {
		return func(leaderCtx context.Context) {
			l := election.LeaseFrom(leaderCtx)
			if l == nil {
				e.t.Errorf("LeaseFrom(leaderCtx) = nil")
				return
			}
			tm := term{identity: id, fence: l.Fence(), started: time.Now(), prevCancelled: true}
			mu.Lock()
			if prev := lastCtx[other]; prev != nil {
				tm.prevCancelled = prev.Err() != nil
			}
			lastCtx[id] = leaderCtx
			if id == "cand-a" {
				aTerms++
			}
			n := aTerms
			mu.Unlock()
			started <- tm
			if id == "cand-b" {
				close(bLeads)
				select {
				case <-bStop:
				case <-leaderCtx.Done():
				}
			} else {
				<-leaderCtx.Done()
			}
			tm.cause = context.Cause(leaderCtx)
			ended <- tm
			if id == "cand-a" && n == 1 {
				// A slow leader: returns only once the successor leads, which
				// the loss (not a release) must make possible.
				select {
				case <-bLeads:
				case <-e.ctx.Done():
				}
			}
		}
	}
	next := func(ch chan term, what string, d time.Duration) term {
		e.t.Helper()
		select {
		case tm := <-ch:
			return tm
		case <-time.After(d):
			e.t.Fatalf("%s: nothing within %v", what, d)
		}
		return term{}
	}
	actx, acancel := context.WithCancel(e.ctx)
	bctx, bcancel := context.WithCancel(e.ctx)
	defer acancel()
	defer bcancel()
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- ea.Run(actx, runFn("cand-a", "cand-b")) }()
	t1 := next(started, "Run leading a vacant election", 2*e.ttl)
	go func() { bDone <- eb.Run(bctx, runFn("cand-b", "cand-a")) }()
	e.sleep(e.ttl / 4)
	fs.BlockRenewals(true)
	blocked := time.Now()

	t2 := next(started, "a new leader after the leader's renewals stalled", 2*e.ttl+2*time.Second)
	e.t.Logf("renewals stalled; %s led %v later", t2.identity, t2.started.Sub(blocked).Round(time.Millisecond))
	if t2.identity != "cand-b" || t2.fence <= t1.fence {
		e.t.Fatalf("after the stall: %s leads with fence %d; want cand-b with a fence > %d", t2.identity, t2.fence, t1.fence)
	}
	if !t2.prevCancelled {
		e.t.Errorf("the new leader's function started while the old leader's leaderCtx was not cancelled")
	}
	first := next(ended, "the old leader's term ending", 2*e.ttl)
	if first.identity != "cand-a" || !errors.Is(first.cause, lease.ErrLost) {
		e.t.Errorf("the old leader's leaderCtx ended with cause %v (%s), want one matching ErrLost (cand-a)", first.cause, first.identity)
	}
	// The stalled process resumes: it is a follower and campaigns again.
	fs.BlockRenewals(false)
	e.sleep(e.ttl / 2)
	if l := ea.Lease(); l != nil {
		e.t.Errorf("the resumed old leader holds leadership (fence %d) while cand-b leads", l.Fence())
	}
	if !o.waitFor(t2.fence, 2*e.ttl) {
		e.t.Errorf("Observe did not deliver the second leader within %v", 2*e.ttl)
	}
	// cand-b stops for good: cand-a's Run, still campaigning, leads again.
	bcancel()
	close(bStop)
	if err := e.runDone(bDone); !errors.Is(err, context.Canceled) {
		e.t.Errorf("Run after its ctx was cancelled: %v, want context.Canceled", err)
	}
	bStopped := time.Now()
	t3 := next(started, "the old leader leading again after the new leader stopped", 2*e.ttl+2*time.Second)
	e.t.Logf("the old leader led again %v after the other stopped", t3.started.Sub(bStopped).Round(time.Millisecond))
	if t3.identity != "cand-a" || t3.fence <= t2.fence {
		e.t.Errorf("third term: %s with fence %d, want cand-a with a fence > %d", t3.identity, t3.fence, t2.fence)
	}
	if !t3.prevCancelled {
		e.t.Errorf("the third term started while the second's leaderCtx was not cancelled")
	}
	// On a loaded machine the third term may be lost (its loss is then
	// reported like any other) and cand-a leads again: Observe must show
	// one of cand-a's terms from the third on, and nothing that did not lead.
	if !o.waitForAtLeast(t3.fence, 2*e.ttl) {
		e.t.Errorf("Observe did not deliver the third leader (fence %d or a later term of cand-a) within %v", t3.fence, 2*e.ttl)
	}
	acancel()
	if err := e.runDone(aDone); !errors.Is(err, context.Canceled) {
		e.t.Errorf("Run after its ctx was cancelled: %v, want context.Canceled", err)
	}
	if ld, err := eb.Leader(e.ctx); err != nil || ld.Held {
		e.t.Errorf("Leader after every Run returned: %+v, %v; want vacant (released)", ld, err)
	}
	stopObserving()
	terms := []election.Leader{{Identity: "cand-a", Fence: t1.fence}, {Identity: "cand-b", Fence: t2.fence}, {Identity: "cand-a", Fence: t3.fence}}
	for more := true; more; {
		select {
		case tm := <-started:
			e.t.Logf("cand-a's term %d was lost and it led again with fence %d", terms[len(terms)-1].Fence, tm.fence)
			if tm.identity != "cand-a" || tm.fence <= terms[len(terms)-1].Fence {
				e.t.Errorf("a later term: %s with fence %d, want cand-a with a fence > %d", tm.identity, tm.fence, terms[len(terms)-1].Fence)
			}
			terms = append(terms, election.Leader{Identity: tm.identity, Fence: tm.fence})
		default:
			more = false
		}
	}
	if len(terms) == 3 {
		e.checkObserved(o, terms)
	} else {
		e.checkObservedAmong(o, terms, 2)
	}
}

// runDone waits for Run's result, failing the test after closeWait.
func (e *env) runDone(ch <-chan error) error {
	e.t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(closeWait):
		e.t.Fatalf("Run did not return within %v of its ctx ending", closeWait)
	}
	return nil
}

// testElectionRunPanic: when Run's function panics, the candidate resigns
// (the leadership lease is released, not left to expire) before the panic
// goes on, with its original value, to Run's caller.
func testElectionRunPanic(e *env) {
	c, other := e.client(e.store()), e.client(e.store())
	key := e.key("election-panic")
	el := e.newElection(c, key, "panicky")
	want := &panicValue{"election.Run"}
	var term *lease.Lease
	got := catch(func() {
		_ = el.Run(e.ctx, func(leaderCtx context.Context) {
			term = election.LeaseFrom(leaderCtx)
			panic(want)
		})
	})
	if got != want {
		e.t.Fatalf("Run's caller recovered %v, want the function's panic value %v", got, want)
	}
	if term == nil {
		e.t.Fatalf("Run did not run the function with a lease")
	}
	if err := term.Err(); !errors.Is(err, lease.ErrReleased) {
		e.t.Errorf("after the function panicked: the term's lease Err() = %v, want ErrReleased", err)
	}
	if l := el.Lease(); l != nil {
		e.t.Errorf("after the function panicked: Lease() = fence %d, want nil", l.Fence())
	}
	l, err := other.TryAcquire(e.ctx, key)
	if err != nil {
		e.t.Fatalf("TryAcquire by another client after Run's function panicked: %v (leadership was not released)", err)
	}
	if l.Fence() <= term.Fence() {
		e.t.Errorf("fence after the panic %d, want > %d", l.Fence(), term.Fence())
	}
}
