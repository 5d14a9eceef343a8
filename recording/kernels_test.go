package recording_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// joinLog runs a Join and writes down what it reports: "k<corr>=<call>"
// for a kernel joined to its call, "k<corr>" for one without, "left
// <call>" for a call that leaves.
type joinLog struct {
	j   *recording.Join[string]
	got []string
}

func newJoinLog() *joinLog {
	l := &joinLog{}
	l.j = recording.NewJoin(func(a *pb.KernelActivity, call string, ok bool) error {
		if ok {
			l.got = append(l.got, fmt.Sprintf("k%d=%s", a.GetCorrelationId(), call))
		} else {
			l.got = append(l.got, fmt.Sprintf("k%d", a.GetCorrelationId()))
		}
		return nil
	}, func(call string) error {
		l.got = append(l.got, "left "+call)
		return nil
	})
	return l
}

func (l *joinLog) check(t *testing.T, step string, want ...string) {
	t.Helper()
	if !slices.Equal(l.got, want) {
		t.Errorf("%s: %q, want %q", step, l.got, want)
	}
	l.got = nil
}

func kernel(corr uint32) *pb.KernelActivity { return &pb.KernelActivity{CorrelationId: corr} }

// An eager launch leaves with its kernel, whichever came first; a replay
// stays for all of its kernels until it is pushed out; kernels whose call
// never comes go without one, oldest first.
func TestJoin(t *testing.T) {
	l := newJoinLog()
	j := l.j
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(j.Call(1, "launch 1", false))
	must(j.Kernel(kernel(1)))
	l.check(t, "eager", "k1=launch 1", "left launch 1")

	must(j.Kernel(kernel(2)))
	must(j.Kernel(kernel(9)))
	l.check(t, "kernels before their calls")
	must(j.Call(2, "launch 2", false))
	l.check(t, "the call comes", "k2=launch 2", "left launch 2")

	must(j.Call(3, "replay 3", true))
	must(j.Kernel(kernel(3)))
	must(j.Kernel(kernel(3)))
	l.check(t, "replay", "k3=replay 3", "k3=replay 3")

	must(j.Call(4, "launch 4", false)) // its kernel never comes
	must(j.Call(5, "launch 5", false))
	j.MaxCalls, j.MaxKernels = 1, 1
	must(j.Trim())
	l.check(t, "trim", "left replay 3", "left launch 4")
	if calls, kernels := j.Waiting(); calls != 1 || kernels != 1 {
		t.Errorf("%d calls and %d kernels wait after Trim", calls, kernels)
	}
	must(j.Kernel(kernel(8)))
	must(j.Trim())
	l.check(t, "trim kernels", "k9")

	must(j.Flush())
	l.check(t, "flush", "k8", "left launch 5")
}

// TestJoinBounded streams launches whose kernels never come (a recording
// without GPU timing): the window stays at its bound.
func TestJoinBounded(t *testing.T) {
	const n = 100_000
	left := 0
	j := recording.NewJoin(func(*pb.KernelActivity, int, bool) error { return nil }, func(int) error { left++; return nil })
	j.MaxCalls = 1000
	for i := range uint32(n) {
		if err := j.Call(i, int(i), false); err != nil {
			t.Fatal(err)
		}
		if i%4096 == 0 {
			if err := j.Trim(); err != nil {
				t.Fatal(err)
			}
			if calls, _ := j.Waiting(); calls > j.MaxCalls {
				t.Fatalf("%d calls wait", calls)
			}
		}
	}
	if err := j.Flush(); err != nil || left != n {
		t.Fatalf("flush: %v, %d calls left", err, left)
	}
}
