package leasedebug

import (
	"errors"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/leasekit/lease"
)

// The page's data, as the template shows it and ?format=json encodes it:
// durations are seconds, events newest first.

type page struct {
	Time    time.Time    `json:"time"`
	Clients []clientView `json:"clients"`

	Refresh int          `json:"-"` // seconds; 0: never
	Style   template.CSS `json:"-"`
}

type clientView struct {
	Holder  string      `json:"holder"`
	Closed  bool        `json:"closed"`
	Time    time.Time   `json:"time"`
	Leases  []leaseView `json:"leases"`
	Waiters []waitView  `json:"waiters"`
	Events  []eventView `json:"events"`
}

type leaseView struct {
	Key               string    `json:"key"`
	Kind              string    `json:"kind"`
	Holder            string    `json:"holder"`
	ID                string    `json:"id"`
	Fence             uint64    `json:"fence"`
	Acquired          time.Time `json:"acquired"`
	HeldSeconds       float64   `json:"held_seconds"`
	LastRenew         time.Time `json:"last_renew"`
	RenewedAgoSeconds float64   `json:"renewed_ago_seconds"`
	LatencySeconds    float64   `json:"latency_seconds"` // of the last renewal; 0 before the first
	RemainingSeconds  float64   `json:"remaining_seconds"`
	Failures          int       `json:"failed_renewals"`
}

type waitView struct {
	Key           string    `json:"key"`
	Kind          string    `json:"kind"`
	Holder        string    `json:"holder"`
	ID            string    `json:"id,omitempty"`
	Since         time.Time `json:"since"`
	WaitedSeconds float64   `json:"waited_seconds"`
	HeldBy        string    `json:"held_by,omitempty"`
	Ahead         int       `json:"queued_ahead"`
}

type eventView struct {
	Time           time.Time `json:"time"`
	AgoSeconds     float64   `json:"ago_seconds"`
	Kind           string    `json:"kind"`
	Key            string    `json:"key"`
	Holder         string    `json:"holder,omitempty"`
	Fence          uint64    `json:"fence,omitempty"`
	Shared         bool      `json:"shared,omitempty"`
	Lease          uint64    `json:"lease,omitempty"` // Event.ID
	WaitSeconds    float64   `json:"wait_seconds,omitempty"`
	LatencySeconds float64   `json:"latency_seconds,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	Error          string    `json:"error,omitempty"`
	Warn           bool      `json:"-"`
}

func view(s lease.Snapshot) clientView {
	v := clientView{Holder: s.Holder, Closed: s.Closed, Time: s.Time,
		Leases: []leaseView{}, Waiters: []waitView{}, Events: []eventView{}}
	for _, l := range s.Leases {
		v.Leases = append(v.Leases, leaseView{
			Key: l.Key, Kind: string(l.Kind), Holder: l.Holder, ID: l.ID, Fence: l.Fence,
			Acquired: l.Acquired, HeldSeconds: l.Held.Seconds(),
			LastRenew: l.LastRenew, RenewedAgoSeconds: s.Time.Sub(l.LastRenew).Seconds(),
			LatencySeconds: l.Latency.Seconds(), RemainingSeconds: l.Remaining.Seconds(), Failures: l.Failures,
		})
	}
	for _, w := range s.Waiters {
		v.Waiters = append(v.Waiters, waitView{
			Key: w.Key, Kind: string(w.Kind), Holder: w.Holder, ID: w.ID,
			Since: w.Since, WaitedSeconds: w.Waited.Seconds(), HeldBy: w.HeldBy, Ahead: w.Ahead,
		})
	}
	for _, e := range slices.Backward(s.Events) {
		ev := eventView{
			Time: e.Time, AgoSeconds: s.Time.Sub(e.Time).Seconds(), Kind: e.Kind.String(), Key: e.Key,
			Holder: e.Holder, Fence: e.Fence, Shared: e.Shared, Lease: e.ID,
			WaitSeconds: e.Wait.Seconds(), LatencySeconds: e.Latency.Seconds(), Reason: string(e.Reason),
		}
		if e.Err != nil {
			ev.Error = e.Err.Error()
		}
		switch e.Kind {
		case lease.EventLost, lease.EventRenewFailed, lease.EventBroken:
			ev.Warn = true
		case lease.EventAcquireFailed:
			ev.Warn = !errors.Is(e.Err, lease.ErrHeld) // a refusal is ordinary
		}
		v.Events = append(v.Events, ev)
	}
	return v
}

// Detail says what the event's kind reports: the wait, the latency, the
// reason and the error, those it has.
func (e eventView) Detail() string {
	var parts []string
	if e.WaitSeconds > 0 {
		parts = append(parts, "waited "+secs(e.WaitSeconds))
	}
	if e.LatencySeconds > 0 {
		parts = append(parts, "latency "+secs(e.LatencySeconds))
	}
	if e.Reason != "" {
		parts = append(parts, "reason "+e.Reason)
	}
	if e.Error != "" {
		parts = append(parts, e.Error)
	}
	return strings.Join(parts, "; ")
}

// secs formats seconds as a duration rounded for reading.
func secs(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
