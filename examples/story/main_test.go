package main

import "testing"

// TestStory runs the quick-start story: its own checks fail the test.
func TestStory(t *testing.T) {
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
