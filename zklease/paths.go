// Znode layout: the per-key parent path, holder node names and the data a
// holder node carries; node paths as errors show them (tokens shortened).

package zklease

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/leasekit/lease"
)

// protectedPrefix starts every holder node name, as in ZooKeeper's
// "protected" creates: "_c_" + a 128-bit random id + "-". Our id is the
// lease token, so a node whose create was cut off by a connection loss is
// found again (and deleted) by its token.
const protectedPrefix = "_c_"

// escapeKey turns a lease key into one znode name: bytes outside
// [A-Za-z0-9_~-] and '.' are percent-escaped, so the result has no '/', no
// character ZooKeeper rejects, and is never "." or "..".
func escapeKey(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '~':
			b.WriteByte(c)
		case c == '.' && key != "." && key != "..":
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// validToken reports whether a token can be part of a node name: 1 to 64
// ASCII letters and digits (the Client's tokens are 32 hex characters).
func validToken(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// nodePrefix is the name of a holder node before the server appends the
// sequence number.
func nodePrefix(token string) string { return protectedPrefix + token + "-" }

// shortToken shortens a token as the core does for its logs: its first 8
// characters and "…". A token is the secret that renews and releases a
// lease, so errors (which the Client logs) never show one in full.
func shortToken(token string) string {
	if len(token) > 8 {
		return token[:8] + "…"
	}
	return token
}

// redactPath returns p, a znode path or a node name, for errors and logs:
// if its last segment is a holder node name "_c_<token>-<sequence>" (or the
// prefix "_c_<token>-", or "_c_<token>"), the token is shortened by
// shortToken; anything else is returned unchanged. The code keeps using full
// paths; only what is shown goes through redactPath.
func redactPath(p string) string {
	dir, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i+1], p[i+1:]
	}
	if !strings.HasPrefix(name, protectedPrefix) {
		return p
	}
	rest, suffix := name[len(protectedPrefix):], ""
	if i := strings.LastIndexByte(rest, '-'); i >= 0 {
		rest, suffix = rest[:i], rest[i:]
	}
	return dir + protectedPrefix + shortToken(rest) + suffix
}

// node is one holder node, parsed from its name.
type node struct {
	name  string
	token string
	seq   int64
}

// parseNode parses "_c_<token>-<sequence>"; ok is false for other names.
func parseNode(name string) (node, bool) {
	if !strings.HasPrefix(name, protectedPrefix) {
		return node{}, false
	}
	i := strings.LastIndexByte(name, '-')
	if i < len(protectedPrefix) {
		return node{}, false
	}
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || seq < 0 {
		return node{}, false
	}
	n := node{name: name, token: name[len(protectedPrefix):i], seq: seq}
	if !validToken(n.token) {
		return node{}, false
	}
	return n, true
}

// sortNodes parses children and returns the holder nodes, lowest sequence
// first. Other children (none are made by this package) are ignored.
func sortNodes(children []string) []node {
	ns := make([]node, 0, len(children))
	for _, c := range children {
		if n, ok := parseNode(c); ok {
			ns = append(ns, n)
		}
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].seq < ns[j].seq })
	return ns
}

// nodeData is what a holder node stores (JSON, for humans and tools too).
type nodeData struct {
	Token  string `json:"token"`
	Holder string `json:"holder,omitempty"`
	TTLms  int64  `json:"ttl_ms"`
	// Waiting marks a queued waiter's node (see queue.go): it is an entry
	// of the key's FIFO queue, not a holder, even when it is the lowest.
	Waiting bool `json:"waiting,omitempty"`
}

// encodeData is the data of r's node; waiting marks a queue entry.
func encodeData(r lease.Request, waiting bool) []byte {
	b, _ := json.Marshal(nodeData{Token: r.Token, Holder: r.Holder, TTLms: r.TTL.Milliseconds(), Waiting: waiting}) // cannot fail
	return b
}

// decodeData parses a holder node's data. Unreadable data (a node written by
// something else) reads as TTL 0: such a node counts as expired.
func decodeData(b []byte) nodeData {
	var d nodeData
	_ = json.Unmarshal(b, &d) // a broken node reads as TTL 0: expired
	return d
}

// expiresAt is the server time (ms since the epoch, the leader's wall clock)
// at which a holder node last written at mtime with this data expires.
func (d nodeData) expiresAt(mtime int64) int64 { return mtime + d.TTLms }
