package kernels

import "testing"

// TestMT19937MatchesNumpy checks the generator against values numpy's
// RandomState(0) is known to give: random_sample() 0.5488135039273248,
// 0.7151893663724195, 0.6027633760716439, and standard_normal()
// 1.764052345967664, 0.4001572083672233 (np.random.seed(0);
// np.random.randn(2)).
func TestMT19937MatchesNumpy(t *testing.T) {
	g := newMT19937(0)
	for i, want := range []float64{0.5488135039273248, 0.7151893663724195, 0.6027633760716439} {
		if got := g.double(); got != want {
			t.Errorf("random_sample %d: %v, want %v", i, got, want)
		}
	}
	g = newMT19937(0)
	for i, want := range []float64{1.764052345967664, 0.4001572083672233} {
		if got := g.gaussian(); got != want {
			t.Errorf("standard_normal %d: %v, want %v", i, got, want)
		}
	}
}
