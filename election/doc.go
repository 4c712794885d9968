// Package election is leader election on top of lease.Client, for every
// lease store: one leader at a time per election key, with a fencing token
// per term, a loss signal, and a loop ([Election.Run]) that campaigns again
// after every loss.
//
// A candidate is an [Election] over a lease.Client and a key; leadership is
// an ordinary lease on the key. [Election.Campaign] waits for it,
// [Election.Resign] releases it, [Election.Leader] reports the leader,
// [Election.Observe] streams leaders in fence order, and [Election.Run]
// runs a function while leading and campaigns again after every loss.
//
// A waiting candidate is a waiting Acquire: queued in the store's FIFO queue
// (so candidates lead in the order they asked), woken by release
// announcements, and out of the queue when Campaign gives up. A broken
// connection or session shows as a transient error that the Client retries
// with backoff; once leading, the loss of the store's session
// (driver.Grant.Lost) ends leadership at once. Campaign returns an error
// matching lease.ErrClosed when the Client is closed while it waits, and
// ctx's error when ctx ends.
package election
