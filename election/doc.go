// Package election is leader election on top of lease.Client, for every
// lease store: one leader at a time per election key, with a fencing token
// per term, a loss signal, and a loop ([Election.Run]) that campaigns again
// after every loss.
//
// A candidate is an [Election] over a lease.Client and a key. Leadership is
// an ordinary lease on the key, so the Client's heartbeat, local deadline,
// loss detection and waiting are used as they are:
//
//   - [Election.Campaign] waits for the key (lease.Client.Acquire: woken by
//     release announcements where the store makes them, else at the holder's
//     expiry) and returns the leader's *lease.Lease, whose Fence is the term's
//     fencing token and whose Context ends when leadership is lost;
//   - [Election.Resign] releases it;
//   - [Election.Leader] reports the current leader (identity, fence, remaining
//     TTL) as the store sees it;
//   - [Election.Observe] delivers every leader it observes, in fence order;
//   - [Election.Run] campaigns, runs a function while leading, cancels the
//     function's context on loss, releases leadership once the function has
//     returned, and campaigns again until its ctx ends.
//
// # Waiting candidates and sessions
//
// A waiting candidate holds nothing in the store: each acquisition attempt is
// one Store.Acquire that either takes the key or leaves nothing behind (a
// ZooKeeper store deletes its losing node at once; an etcd store refreshes
// or re-grants its etcd lease within the attempt; a PostgreSQL advisory-mode
// store takes its session connection only for the attempt and for the
// lease). A candidate therefore never waits on a session that died, the
// failure etcd's concurrency package had (etcd #19597): if the store's
// connection or session breaks while it waits, its next attempt fails with a
// transient error that the Client retries with backoff, or runs on the
// session the store re-created. Campaign returns promptly with an error matching
// lease.ErrClosed when the Client is closed while it waits, and with ctx's
// error when ctx ends. Once leading, the loss of the store's session
// (driver.Grant.Lost) ends leadership at once.
package election
