package leasedebug

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/leasekit/lease"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed style.css
	style string

	pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
		"inc":   func(i int) int { return i + 1 },
		"secs":  secs,
		"stamp": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 MST") },
	}).Parse(pageHTML))

	// pageCSP lets the page apply its one style sheet and nothing else: no
	// script, image, frame, form or other resource.
	pageCSP = "default-src 'none'; style-src '" + hashOf(style) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// defaultRefresh is how often the page reloads itself, in seconds, unless
// ?refresh=N says otherwise; maxRefresh is the longest it accepts.
const (
	defaultRefresh = 5
	maxRefresh     = 3600
)

// Handler returns a handler serving the state of clients: an HTML page, or
// JSON with ?format=json. See the package doc. A nil Client is left out.
func Handler(clients ...*lease.Client) http.Handler {
	return &handler{clients: slices.DeleteFunc(slices.Clone(clients), func(c *lease.Client) bool { return c == nil })}
}

type handler struct{ clients []*lease.Client }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	refresh := defaultRefresh
	if s := q.Get("refresh"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxRefresh {
			http.Error(w, "refresh: want whole seconds from 0 (never) to "+strconv.Itoa(maxRefresh), http.StatusBadRequest)
			return
		}
		refresh = n
	}
	p := page{Time: time.Now(), Clients: make([]clientView, len(h.clients))}
	for i, c := range h.clients {
		p.Clients[i] = view(c.Snapshot())
	}
	var buf bytes.Buffer
	switch f := q.Get("format"); f {
	case "json":
		hdr.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		hdr.Set("Content-Type", "application/json; charset=utf-8")
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(p); err != nil {
			http.Error(w, "encoding the snapshot: "+err.Error(), http.StatusInternalServerError)
			return
		}
	case "", "html":
		hdr.Set("Content-Security-Policy", pageCSP)
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		p.Refresh, p.Style = refresh, template.CSS(style)
		if err := pageTmpl.Execute(&buf, p); err != nil {
			http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
			return
		}
	default:
		http.Error(w, "format: want html or json", http.StatusBadRequest)
		return
	}
	_, _ = w.Write(buf.Bytes())
}
