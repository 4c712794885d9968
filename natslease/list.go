// Listing keys and breaking leases (driver.Lister, driver.Breaker).

package natslease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// List reads the namespace's keys in the order of their last writes, one
// direct get per key, from the stream sequence after cursor: a key written
// during the listing may come again later in it.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	page, next, err := s.list(ctx, prefix, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("natslease: list %q: %w", prefix, err)
	}
	return page, next, nil
}

func (s *Store) list(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	var seq uint64
	if cursor != "" {
		n, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil || n == 0 {
			return nil, "", lease.Invalid("cursor", "%q is not one of this listing's", cursor)
		}
		seq = n
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, "", err
	}
	subjects := s.subject("")
	var page []driver.Entry
	for range max(limit, 1) {
		m, err := s.stream.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(subjects+s.ns+".>"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return page, "", nil
		} else if err != nil {
			return nil, "", err
		}
		seq = m.Sequence
		key, ok := s.leaseKey(strings.TrimPrefix(m.Subject, subjects))
		if !ok || !strings.HasPrefix(key, prefix) || m.Header.Get(kvOperation) != "" {
			continue // not a lease key, another prefix's, or a deleted key
		}
		if st, err := decode(m.Data, m.Sequence, m.Time); err == nil {
			if e := entry(key, st, now); len(e.Holders)+len(e.Broken) > 0 {
				page = append(page, e)
			}
		}
	}
	return page, strconv.FormatUint(seq, 10), nil
}

// entry describes key from its state at the server time now.
func entry(key string, st state, now time.Time) driver.Entry {
	e := driver.Entry{Key: key}
	if st.live(now) {
		e.Holders = []driver.Holder{{Token: st.Token, Holder: st.Holder, Fence: st.fence(), Remaining: st.expires().Sub(now)}}
	}
	for _, b := range st.broken(now) {
		e.Broken = append(e.Broken, b.Token)
	}
	return e
}

// Break frees key with one compare-and-set that leaves a tombstone for its
// holder's token, living until the hold would have expired.
func (s *Store) Break(ctx context.Context, key string) (driver.Entry, error) {
	st, now, err := s.getNow(ctx, key)
	if err != nil {
		return driver.Entry{}, fmt.Errorf("natslease: break %q: %w", key, err)
	}
	e := entry(key, st, now)
	if len(e.Holders) == 0 {
		return e, nil
	}
	tombs := append(st.broken(now), tombstone{Token: st.Token, Until: st.expires().UnixNano()})
	if _, err := s.put(ctx, key, st.rev, record{Broken: tombs}); err != nil {
		return driver.Entry{}, fmt.Errorf("natslease: break %q: %w", key, err)
	}
	return e, nil
}

// kvOperation is the header of the KV's delete and purge markers.
const kvOperation = "KV-Operation"
