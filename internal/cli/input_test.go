package cli

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// --process errors of a job of thousands of ranks name a few processes and count the rest:
// each listed every process in one line (43 KB for 4000 ranks).
func TestPickProcessNamesAFew(t *testing.T) {
	set := &recording.Set{Dir: "job"}
	for i := range 1000 {
		// 8 hosts of 125 ranks each, their pids 100 to 224 on every host: 100 is 8 pids and a rank.
		set.Processes = append(set.Processes, &recording.Process{Name: fmt.Sprintf("n%d-%d", i/125, 100+i%125),
			Info: &pb.Process{Hostname: fmt.Sprintf("n%d", i/125), Pid: uint32(100 + i%125), Rank: proto.Int32(int32(i))}})
	}
	for which, want := range map[string]string{
		"": "nan: job holds 1000 processes; pick one with --process (n0-100, n0-101, n0-102, n0-103, n0-104, n0-105, n0-106, n0-107, and 992 more)",
		"nosuch": `nan: job has no process "nosuch"; it holds n0-100, n0-101, n0-102, n0-103, n0-104, n0-105, n0-106, n0-107, and 992 more ` +
			"(--process takes a name, a pid or a rank)",
		"100": "nan: --process 100 is the pid or rank of 9 processes (n0-100, n0-200, n1-100, n2-100, n3-100, n4-100, n5-100, n6-100, and 1 more): " +
			"name one by its directory name",
	} {
		if _, err := pickProcess("nan", set, which); err == nil || err.Error() != want {
			t.Errorf("--process %q: %v; want %q", which, err, want)
		}
	}
	if p, err := pickProcess("nan", set, "n7-224"); err != nil || p != set.Processes[999] {
		t.Errorf("--process n7-224: %v, %v", p, err)
	}
}

// A job killed whole (every rank incomplete) gets info's one-line error with a few ranks and
// a count of the rest: it named every rank, 45 KB for 2000.
func TestProblemsNamesAFew(t *testing.T) {
	r := &info.Report{}
	for i := range 2000 {
		r.Processes = append(r.Processes, &info.Process{Name: fmt.Sprintf("n%d", i), Damaged: map[bool]string{true: "checksum mismatch"}[i == 1]})
	}
	want := "job: recording has problems (n0: incomplete; n1: damaged; n2: incomplete; n3: incomplete; n4: incomplete; n5: incomplete; " +
		"n6: incomplete; n7: incomplete; and 1992 more); see the report"
	if err := problemsError("job", r); err == nil || err.Error() != want {
		t.Errorf("%v; want %q", err, want)
	}
}
