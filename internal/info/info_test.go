package info

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpurr/gpurr/internal/testrec"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func summarizeVariant(t *testing.T, v testrec.Variant) *Report {
	t.Helper()
	set := testrec.Open(t, v)
	r, err := Summarize(set, set.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestProblems(t *testing.T) {
	for v, want := range map[testrec.Variant]string{
		testrec.Good:       "",
		testrec.Incomplete: "incomplete",
		testrec.Truncated:  "truncated",
		testrec.Lossy:      "launches_dropped activities_dropped callstacks_failed modules_failed errors ring_bytes_dropped",
	} {
		r := summarizeVariant(t, v)
		if got := strings.Join(r.Processes[0].Problems(), " "); got != want {
			t.Errorf("%s: problems %q, want %q", v, got, want)
		}
		if got := r.Processes[1].Problems(); len(got) != 0 {
			t.Errorf("%s: the whole rank has problems %q", v, got)
		}
	}
}

// TestEveryLossCounted sets each loss counter alone: a counter added to
// Stats later must show up without a change here.
func TestEveryLossCounted(t *testing.T) {
	fields := (&pb.Stats{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		s := &pb.Stats{}
		s.ProtoReflect().Set(fd, protoreflect.ValueOfUint64(7))
		got := losses(s)
		isLoss := strings.HasSuffix(name, "_dropped") || strings.HasSuffix(name, "_failed") || name == "errors"
		if isLoss != (len(got) == 1) {
			t.Errorf("%s: losses %v", name, got)
		}
	}
}

func TestTotals(t *testing.T) {
	r := summarizeVariant(t, testrec.Lossy)
	if r.Total == nil || r.Total.Processes != 2 || r.Total.WithProblems != 1 || r.Total.Kernels != 4 {
		t.Fatalf("total %+v", r.Total)
	}
	p := r.Processes[1]
	if r.Total.Launches != r.Processes[0].Launches+p.Launches || p.Launches != 12 || p.Captured != 2 || p.GraphLaunches != 2 {
		t.Errorf("launch counts: total %+v, rank 1 %d eager %d captured %d graph", r.Total, p.Launches, p.Captured, p.GraphLaunches)
	}
	if p.TopByCount[0].Runs != 6 || !strings.HasPrefix(p.TopByTime[0].Name, "sm90_xmma_gemm") {
		t.Errorf("top kernels: by count %+v, by time %+v", p.TopByCount[0], p.TopByTime[0])
	}
}

func TestShorten(t *testing.T) {
	long := strings.Repeat("k", 100)
	if got := shorten(long, 80); len(got) != 80 || !strings.HasSuffix(got, "...") {
		t.Errorf("shorten = %q", got)
	}
	if got := shorten(strings.Repeat("µ", 50), 80); !strings.HasSuffix(got, "µ...") {
		t.Errorf("shorten split a rune: %q", got)
	}
	if got := shorten("", 80); got != "(unknown kernel)" {
		t.Errorf("shorten empty = %q", got)
	}
}

func TestFormats(t *testing.T) {
	for ns, want := range map[uint64]string{0: "0ns", 999: "999ns", 1500: "1.5µs", 2_345_000: "2.35ms", 3_000_000_000: "3.000s"} {
		if got := formatNS(ns); got != want {
			t.Errorf("formatNS(%d) = %q, want %q", ns, got, want)
		}
	}
	for n, want := range map[uint64]string{12: "12 B", 36 << 10: "36.0 KiB", 85_520_809_984: "79.6 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
