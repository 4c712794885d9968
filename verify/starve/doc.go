// Package starve measures false losses on a starved host: healthy holders
// whose leases are lost for lack of a timely renewal while busy-loop
// processes compete for every core. It has no API; the measurement is
// TestStarve, run only when LEASE_VERIFY_STARVE=1 (docs/RELIABILITY.md,
// "Starved CPU", gives the command and the figures).
package starve
