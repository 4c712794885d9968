package lease

// MaxInflight is maxInflight, for tests.
const MaxInflight = maxInflight

// Pending returns how many acquisitions and releases of c wait for the next
// batched store call.
func Pending(c *Client) (acquires, releases int) {
	if c.acquirer != nil {
		c.acquirer.mu.Lock()
		acquires = len(c.acquirer.pending)
		c.acquirer.mu.Unlock()
	}
	if c.releaser != nil {
		c.releaser.mu.Lock()
		releases = len(c.releaser.pending)
		c.releaser.mu.Unlock()
	}
	return acquires, releases
}
