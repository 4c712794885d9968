//go:build linux

// Listing keys and breaking leases (driver.Lister, driver.Breaker).

package filelease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

var (
	_ driver.Lister  = (*Store)(nil)
	_ driver.Breaker = (*Store)(nil)
)

// List returns the live keys starting with prefix among the lease files
// named after cursor (the last file name scanned), in file-name order,
// reading at most 4×limit files a page. Each page re-reads the directory's
// names; each file is read under its shared lock. A file that is corrupt is
// skipped (Inspect of its key reports it).
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]driver.Entry, string, error) {
	d, err := os.Open(s.dir)
	if err != nil {
		return nil, "", fmt.Errorf("filelease: list: %w", err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return nil, "", fmt.Errorf("filelease: list: %w", err)
	}
	enc := escape(prefix)
	names = slices.DeleteFunc(names, func(n string) bool {
		return n <= cursor || !strings.HasSuffix(n, Suffix) || strings.HasPrefix(n, ".") || !mayHold(n, enc)
	})
	slices.Sort(names)
	limit = max(limit, 1)
	var page []driver.Entry
	for i, name := range names {
		if len(page) == limit || i == 4*limit {
			return page, names[i-1], nil
		}
		if err := ctx.Err(); err != nil {
			return nil, "", fmt.Errorf("filelease: list: %w", err)
		}
		lf, err := open(filepath.Join(s.dir, name), modeRead)
		if errors.Is(err, ErrCorrupt) || errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, "", fmt.Errorf("filelease: list: %w", err)
		}
		rec := lf.rec
		lf.close()
		if !strings.HasPrefix(rec.Key, prefix) || fileName(rec.Key) != name {
			continue
		}
		if e := rec.entry(monotonicNow(), s.boot); len(e.Holders)+len(e.Waiters)+len(e.Broken) > 0 {
			page = append(page, e)
		}
	}
	return page, "", nil
}

// mayHold reports whether file name may hold a key whose escape starts with
// enc: its name starts with enc, or with the part of enc that a long key's
// hashed name keeps.
func mayHold(name, enc string) bool {
	if strings.HasPrefix(name, enc) {
		return true
	}
	kept, _, hashed := strings.Cut(name, "~")
	return hashed && strings.HasPrefix(enc, kept)
}

// Break frees key whoever holds it, leaving a tombstone for each evicted
// token until its hold would have expired, keeps the queue and the fence,
// and announces the key.
func (s *Store) Break(ctx context.Context, key string) (driver.Entry, error) {
	e := driver.Entry{Key: key}
	err := s.do(ctx, "break", key, modeWrite, func(lf *leaseFile, now int64) error {
		rec := lf.rec.live(now, s.boot)
		if e = rec.entry(now, s.boot); len(e.Holders) == 0 {
			return nil
		}
		for _, h := range e.Holders {
			rec.Broken = append(rec.Broken, tomb{Token: h.Token, Expires: now + int64(h.Remaining)})
		}
		rec = record{Key: rec.Key, Fence: rec.Fence, QueueBoot: s.boot, Queue: rec.Queue, Broken: rec.Broken}
		if err := lf.write(rec, true); err != nil {
			return err
		}
		_ = lf.touch() // as Release: a lost announcement only delays waiters
		return nil
	})
	if errors.Is(err, lease.ErrNotHeld) { // no file: a key never held
		return driver.Entry{Key: key}, nil
	}
	return e, err
}

// entry describes r at now of boot, as List and Break report it.
func (r record) entry(now int64, boot string) driver.Entry {
	r = r.live(now, boot)
	e := driver.Entry{Key: r.Key}
	if r.held(now, boot) {
		e.Holders = append(e.Holders, driver.Holder{Token: r.Token, Holder: r.Holder, Fence: r.Fence, Remaining: time.Duration(r.Expires - now)})
	}
	for _, rd := range r.Readers {
		e.Holders = append(e.Holders, driver.Holder{Token: rd.Token, Holder: rd.Holder, Fence: r.Fence, Remaining: time.Duration(rd.Expires - now), Shared: true})
	}
	for _, w := range r.Queue {
		e.Waiters = append(e.Waiters, driver.Waiter{Token: w.Token, Shared: w.Shared, Remaining: time.Duration(w.Expires - now)})
	}
	for _, t := range r.Broken {
		e.Broken = append(e.Broken, t.Token)
	}
	return e
}
