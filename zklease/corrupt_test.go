package zklease_test

import (
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/leasekit/lease/leasetest"
	"github.com/leasekit/lease/zklease"
)

// TestForeignData: a node named as ours whose data we did not write is
// ErrCorrupt, never judged expired and granted over.
func TestForeignData(t *testing.T) {
	srvs := servers(t)
	c := connect(t, srvs)
	openParent(t, c, "/leasekit-test")
	r := root("corrupt")
	t.Cleanup(func() { removeAll(c, r) })
	s := dial(t, srvs, zklease.WithRoot(r))
	tok := token()
	for _, tc := range []struct{ what, data string }{
		{"data that is no JSON", "garbage"},
		{"no data", ""},
		{"JSON without a TTL", `{"token":"` + tok + `"}`},
		{"a negative TTL", `{"token":"` + tok + `","ttl_ms":-5}`},
		{"JSON of other types", `{"token":1,"ttl_ms":"soon"}`},
	} {
		key := "foreign-" + randHex(4)
		for _, p := range []string{r, r + "/" + key} {
			if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
				t.Fatal(err)
			}
		}
		if _, err := c.Create(r+"/"+key+"/_c_"+tok+"-", []byte(tc.data), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		leasetest.WantCorrupt(t, s, key, tok, tc.what)
	}
}
