// Znode layout: key paths, node names and data; paths as errors show them.

package zklease

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// nodePrefix starts every node name, as ZooKeeper's "protected" creates
// do: a node whose create was cut off is found again by its token.
const nodePrefix = "_c_"

// readMark ends the token in a reader's node name: "_c_<token>-r-<seq>".
const readMark = "-r"

// escapeKey turns a key into one znode name: bytes outside [A-Za-z0-9_~-]
// and '.' are percent-escaped, and the result is never "." or "..".
func escapeKey(key string) string {
	var b strings.Builder
	for _, c := range []byte(key) {
		if strings.IndexByte(unescaped, c) >= 0 || c == '.' && key != "." && key != ".." {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

const unescaped = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_~"

// redactPath shortens the token in p, a node path or name
// ".../_c_<token>-<sequence>", to its first 8 characters and "…", as the
// Client's logs show tokens: errors never reveal one.
func redactPath(p string) string {
	i := strings.LastIndex("/"+p, "/"+nodePrefix) + len(nodePrefix) // the token's start
	if j := strings.LastIndexByte(p, '-'); i >= len(nodePrefix) && j > i+8 {
		return p[:i+8] + "…" + p[j:]
	}
	return p
}

// node is one child of a key's parent, parsed from its name.
type node struct {
	path, token string
	seq         int64
	shared      bool // a reader's
}

// nodes lists the nodes under parent (none if it is missing), lowest
// sequence first, and finds token's lowest node among them (-1: none).
func (s *Store) nodes(parent, token string) ([]node, int, error) {
	children, _, err := s.conn.Children(parent)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, -1, fmt.Errorf("list %s: %w", parent, err)
	}
	ns := parseNodes(parent, children)
	return ns, slices.IndexFunc(ns, func(n node) bool { return n.token == token }), nil
}

// parseNodes returns the nodes among children, the names under parent,
// lowest sequence first.
func parseNodes(parent string, children []string) []node {
	ns := make([]node, 0, len(children))
	for _, c := range children {
		i := strings.LastIndexByte(c, '-')
		seq, err := strconv.ParseInt(c[i+1:], 10, 64)
		if strings.HasPrefix(c, nodePrefix) && i >= len(nodePrefix) && err == nil && seq >= 0 {
			token, shared := strings.CutSuffix(c[len(nodePrefix):i], readMark)
			ns = append(ns, node{path: parent + "/" + c, token: token, seq: seq, shared: shared})
		}
	}
	slices.SortFunc(ns, func(a, b node) int { return cmp.Compare(a.seq, b.seq) })
	return ns
}

// lead counts the nodes that hold the key together: the lowest one, and
// the readers right behind it if it is a reader.
func lead(ns []node) int {
	h := min(len(ns), 1)
	for h < len(ns) && ns[0].shared && ns[h].shared {
		h++
	}
	return h
}

// nodeData is what a node stores (JSON, for humans and tools too).
type nodeData struct {
	Token  string `json:"token"`
	Holder string `json:"holder,omitempty"`
	TTLms  int64  `json:"ttl_ms"`
	Epoch  int64  `json:"epoch,omitempty"` // a reader's fence, when not its czxid
}

// decodeData parses a node's data; data encodeData did not write is an
// error matching lease.ErrCorrupt (which shows its size only: data may hold
// a token).
func decodeData(data []byte) (nodeData, error) {
	var d nodeData
	if err := json.Unmarshal(data, &d); err != nil || d.TTLms <= 0 || d.Epoch < 0 {
		return nodeData{}, fmt.Errorf("%w: its %d bytes of data are not a lease's", lease.ErrCorrupt, len(data))
	}
	return d, nil
}

func encodeData(r driver.Request, epoch int64) []byte {
	b, _ := json.Marshal(nodeData{Token: r.Token, Holder: r.Holder, TTLms: r.TTL.Milliseconds(), Epoch: epoch}) // cannot fail
	return b
}
