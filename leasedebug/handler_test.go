package leasedebug_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/leasedebug"
	"github.com/leasekit/lease/memlease"
)

// serve serves the page of two clients of one in-memory store: "worker-1"
// holds job:invoice and job:backup; "worker-2" was refused job:backup and
// waits for job:invoice in the queue.
func serve(t *testing.T) (*httptest.Server, *lease.Lease) {
	t.Helper()
	store := memlease.New()
	t.Cleanup(func() { _ = store.Close() })
	holder := newClient(t, store, "worker-1", lease.WithTTL(3*time.Second)) // renewed within the test
	waiter := newClient(t, store.Handle(), "worker-2")
	ctx := context.Background()
	l, err := holder.TryAcquire(ctx, "job:invoice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.TryAcquire(ctx, "job:backup"); err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.TryAcquire(ctx, "job:backup"); err == nil {
		t.Fatal("worker-2 acquired job:backup, held by worker-1")
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = waiter.Acquire(wctx, "job:invoice")
	}()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if s := waiter.Snapshot(); len(s.Waiters) == 1 && s.Waiters[0].HeldBy != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter was not refused within 5s")
		}
	}
	srv := httptest.NewServer(leasedebug.Handler(holder, waiter))
	t.Cleanup(srv.Close)
	return srv, l
}

func newClient(t *testing.T, store *memlease.Store, holder string, opts ...lease.Option) *lease.Client {
	t.Helper()
	c, err := lease.New(store, append(opts, lease.WithHolder(holder))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// table returns the HTML of the element with id, up to the next heading.
func table(t *testing.T, html, id string) string {
	t.Helper()
	i := strings.Index(html, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element %q in\n%s", id, html)
	}
	html = html[i:]
	if j := strings.Index(html, "<h"); j >= 0 {
		html = html[:j]
	}
	return html
}

func TestPage(t *testing.T) {
	srv, l := serve(t)
	resp, body := get(t, srv.URL)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	held := table(t, body, "leases-1")
	for _, want := range []string{`data-key="job:invoice"`, `data-key="job:backup"`, "worker-1", "exclusive"} {
		if !strings.Contains(held, want) {
			t.Errorf("the held leases lack %q:\n%s", want, held)
		}
	}
	waiting := table(t, body, "waiters-2")
	for _, want := range []string{`data-key="job:invoice"`, "worker-2", "<td>worker-1</td>"} {
		if !strings.Contains(waiting, want) {
			t.Errorf("the waiters lack %q:\n%s", want, waiting)
		}
	}
	if !strings.Contains(table(t, body, "leases-2"), "No lease held") || !strings.Contains(table(t, body, "events-1"), "acquired") {
		t.Error("the waiter's client shows a lease, or the holder's no event")
	}
	if strings.Contains(body, l.Token()) {
		t.Error("the page shows a token")
	}
	if !strings.Contains(body, `<meta http-equiv="refresh" content="5">`) || strings.Contains(body, "<script") {
		t.Error("the page does not reload every 5s, or has a script")
	}
}

func TestPageCSP(t *testing.T) {
	srv, _ := serve(t)
	resp, body := get(t, srv.URL)
	csp := resp.Header.Get("Content-Security-Policy")
	m := regexp.MustCompile(`(?s)<style>(.*)</style>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no style element")
	}
	sum := sha256.Sum256([]byte(m[1]))
	hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	if !strings.HasPrefix(csp, "default-src 'none';") || !strings.Contains(csp, "style-src "+hash+";") {
		t.Errorf("Content-Security-Policy %q: want default-src 'none' and style-src %s", csp, hash)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", got)
	}
}

func TestJSON(t *testing.T) {
	srv, l := serve(t)
	resp, body := get(t, srv.URL+"?format=json")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	if strings.Contains(body, l.Token()) {
		t.Error("the JSON shows a token")
	}
	var p struct {
		Clients []struct {
			Holder string
			Leases []struct {
				Key, Kind, Holder, ID string
				Fence                 uint64
				RemainingSeconds      float64 `json:"remaining_seconds"`
			}
			Waiters []struct {
				Key, Holder, ID string
				HeldBy          string `json:"held_by"`
			}
			Events []struct{ Kind, Key string }
		}
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Clients) != 2 || len(p.Clients[0].Leases) != 2 || len(p.Clients[1].Waiters) != 1 {
		t.Fatalf("%+v", p)
	}
	h := p.Clients[0].Leases[1] // by key: backup, invoice
	if h.Key != "job:invoice" || h.Kind != "exclusive" || h.Holder != "worker-1" || h.Fence != l.Fence() ||
		len(h.ID) != 8 || h.RemainingSeconds <= 0 {
		t.Errorf("lease %+v", h)
	}
	if w := p.Clients[1].Waiters[0]; w.Key != "job:invoice" || w.Holder != "worker-2" || w.HeldBy != "worker-1" || len(w.ID) != 8 {
		t.Errorf("waiter %+v", w)
	}
	if e := p.Clients[0].Events; len(e) != 2 || e[0].Kind != "acquired" || e[0].Key != "job:backup" {
		t.Errorf("events %+v: want the two acquisitions, newest first", e)
	}
}

func TestQuery(t *testing.T) {
	srv, _ := serve(t)
	if _, body := get(t, srv.URL+"?refresh=0"); strings.Contains(body, `http-equiv="refresh"`) {
		t.Error("?refresh=0 reloads")
	}
	if _, body := get(t, srv.URL+"?refresh=30"); !strings.Contains(body, `content="30"`) {
		t.Error("?refresh=30 does not reload every 30s")
	}
	for _, q := range []string{"?refresh=-1", "?refresh=x", "?refresh=3601", "?format=xml"} {
		if resp, _ := get(t, srv.URL+q); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s, want 400", q, resp.Status)
		}
	}
	resp, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s", resp.Status)
	}
}

func TestNilClient(t *testing.T) {
	rec := httptest.NewRecorder()
	leasedebug.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/leases?format=json", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"clients": []`) {
		t.Errorf("Handler(nil): %d %q, want 200 and no clients", rec.Code, rec.Body.String())
	}
}
