package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lease run --metrics-addr serves the debug page (package leasedebug) too.
func TestDebugPage(t *testing.T) {
	store, key := fileStore(t), uniqueKey(t)
	dir := t.TempDir()
	addr := freePort(t)
	cmd, out := background(t, "run", "--store", store, key, "--holder", "debug-holder", "--metrics-addr", addr, "--",
		"sh", "-c", `echo ready > "$0/ready"; while [ ! -e "$0/stop" ]; do sleep 0.1; done`, dir)
	waitFile(t, filepath.Join(dir, "ready"), 20*time.Second)
	body := func(query string) string {
		resp, err := http.Get("http://" + addr + "/debug/leases" + query)
		if err != nil {
			t.Fatalf("GET /debug/leases%s: %v\n%s", query, err, out.String())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /debug/leases%s: %s", query, resp.Status)
		}
		return string(b)
	}
	var page struct {
		Clients []struct {
			Leases []struct{ Key, Holder string }
		}
	}
	if err := json.Unmarshal([]byte(body("?format=json")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Clients) != 1 || len(page.Clients[0].Leases) != 1 ||
		page.Clients[0].Leases[0].Key != key || page.Clients[0].Leases[0].Holder != "debug-holder" {
		t.Errorf("the page's JSON: %+v, want %s held by debug-holder", page, key)
	}
	if html := body(""); !strings.Contains(html, `data-key="`+key+`"`) {
		t.Errorf("the page does not show %s:\n%s", key, html)
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "lease run to exit", func() bool { return cmd.exited() })
	if c := cmd.code(); c != 0 {
		t.Errorf("exit %d:\n%s", c, out.String())
	}
}
