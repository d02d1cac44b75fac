package outline

import "testing"

// TestAttemptsFor: a write refused for its swapCommit again and again is
// tried until its refused attempts would pass refusalPoints, at least
// eager times and at most retries+1: a one-bullet insert 25 times, a full
// batch of 200 creates 4 times (it was 9 times: 5,400 points, more than the
// hour's 5,000).
func TestAttemptsFor(t *testing.T) {
	for _, c := range []struct{ cost, want int }{{0, 25}, {3, 25}, {24, 25}, {30, 20}, {150, 4}, {200, 4}, {600, 4}, {6000, 4}} {
		if got := attemptsFor(c.cost); got != c.want {
			t.Errorf("attemptsFor(%d) = %d, want %d", c.cost, got, c.want)
		}
		if got := attemptsFor(c.cost); c.cost > 0 && got > eager && got*c.cost > refusalPoints {
			t.Errorf("attemptsFor(%d) = %d: %d points refused, over %d", c.cost, got, got*c.cost, refusalPoints)
		}
	}
}
