package race

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is a kernel with a race between two instructions: the result changes when both a and
// b are delayed, and the seed's choice of threads is right (odd seeds), as a delay that lands
// on the wrong warps does nothing.
type model struct {
	a, b  int
	noisy bool // nondeterministic without any delay
	runs  int
}

func (m *model) Run(points []int, seed uint64) (Output, error) {
	m.runs++
	if m.noisy {
		return Output{uint64(m.runs)}, nil
	}
	if slices.Contains(points, m.a) && slices.Contains(points, m.b) && seed%2 == 1 {
		return Output{1, 99}, nil
	}
	return Output{1, 2}, nil
}

func TestHuntReducesToTheRacingPair(t *testing.T) {
	m := &model{a: 17, b: 42}
	res, err := Hunt(m, 60, Options{Steps: []Step{{Trials: 8}}, Seed: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Found || res.Seed != 11 || res.Trials != 2 {
		t.Fatalf("found %v with seed %d after %d trials; want seed 11 on the second", res.Found, res.Seed, res.Trials)
	}
	if !slices.Equal(res.Points, []int{17, 42}) {
		t.Errorf("points %v, want [17 42]", res.Points)
	}
	if d := res.Baseline.Differing(res.Witness); !slices.Equal(d, []int{1}) {
		t.Errorf("differing regions %v, want [1]", d)
	}
	if res.Runs > 80 {
		t.Errorf("%d runs to reduce 60 points to 2", res.Runs)
	}
}

func TestHuntAlreadyNondeterministic(t *testing.T) {
	res, err := Hunt(&model{noisy: true}, 10, Options{Steps: []Step{{Trials: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Nondeterministic || !slices.Equal(res.Varying, []int{0}) || res.Trials != 0 {
		t.Errorf("nondeterministic %v varying %v trials %d", res.Nondeterministic, res.Varying, res.Trials)
	}
}

func TestHuntNothing(t *testing.T) {
	res, err := Hunt(&model{a: 1, b: 2}, 1, Options{Steps: []Step{{Trials: 4}}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Found || res.Trials != 4 {
		t.Errorf("found %v after %d trials in a kernel whose race needs two points of one", res.Found, res.Trials)
	}
}

// minimize finds a 1-minimal subset for random monotone targets.
func TestMinimize(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		n := 1 + r.IntN(50)
		set := make([]int, n)
		for i := range set {
			set[i] = i
		}
		need := map[int]bool{}
		for range 1 + r.IntN(3) {
			need[r.IntN(n)] = true
		}
		differs := func(ps []int) (bool, error) {
			for k := range need {
				if !slices.Contains(ps, k) {
					return false, nil
				}
			}
			return true, nil
		}
		got, err := minimize(set, differs)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(need) {
			t.Fatalf("n=%d need %v: got %v", n, need, got)
		}
		for _, p := range got {
			if !need[p] {
				t.Fatalf("n=%d need %v: got %v", n, need, got)
			}
		}
	}
}

// slow hangs (sleeps) on the run with seed 3.
type slow struct{}

func (slow) Run(points []int, seed uint64) (Output, error) {
	if seed == 3 {
		time.Sleep(200 * time.Millisecond)
	}
	return Output{1}, nil
}

func TestGuardedReportsAHang(t *testing.T) {
	hung := make(chan uint64, 1)
	g := &Guarded{Inner: slow{}, Min: 20 * time.Millisecond, Factor: 10,
		Hung: func(points []int, seed uint64, waited time.Duration) { hung <- seed }}
	for seed := range uint64(3) {
		if _, err := g.Run([]int{0}, seed); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case s := <-hung:
		t.Fatalf("a run that did not hang was reported (seed %d)", s)
	default:
	}
	g.Run([]int{0}, 3)
	select {
	case s := <-hung:
		if s != 3 {
			t.Errorf("hang reported for seed %d, want 3", s)
		}
	case <-time.After(time.Second):
		t.Error("the hanging run was not reported")
	}
}

func TestSpread(t *testing.T) {
	a := []byte{1, 2, 3, 4, 5, 6}
	b := []byte{1, 2, 9, 4, 8, 6}
	if got, want := spread(3, a, b), (Spread{Region: 3, First: 2, Bytes: 2, Size: 6}); got != want {
		t.Errorf("spread %+v, want %+v", got, want)
	}
	if got := spread(0, a, a); got.First != -1 || got.Bytes != 0 {
		t.Errorf("equal bytes: %+v", got)
	}
}
