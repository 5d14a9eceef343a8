package replay

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// The state after launch 2 of WriteReplayableTorn is torn by launch 4's kernel; nothing else
// is, nor anything in WriteReplayable's recording.
func TestTears(t *testing.T) {
	dir := t.TempDir()
	if _, err := testrec.WriteReplayableTorn(dir); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, dir)
	before, after := src.Tears(2)
	want := []recording.Tear{{Stream: testrec.TornStream, Launch: testrec.TornLaunch, Kernel: "saxpy_gridstride"}}
	if before != nil || !slices.Equal(after, want) {
		t.Errorf("launch 2's tears: before %v, after %v; want none, %v", before, after, want)
	}
	// Replay says so whatever came of it: here, with no GPU or a fake module, it failed.
	o := src.Replay(2, nil, Request{})
	if o.Status != StatusFailed || !slices.ContainsFunc(o.Notes, func(n string) bool {
		return strings.HasPrefix(n, "the recorded state after it is torn: stream 5's kernel saxpy_gridstride (launch 4) ran while it was taken")
	}) {
		t.Errorf("replay of launch 2: %s, notes %q; want failed, with a note that its state after it is torn", o.Status, o.Notes)
	}
	dir = t.TempDir()
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	if before, after := openSource(t, dir).Tears(2); before != nil || after != nil {
		t.Errorf("alone: tears %v, %v; want none", before, after)
	}
}

// A replay that differs from a torn state is torn, and says which state and what tore it; the
// other verdicts stand, with a note.
func TestJudgeTorn(t *testing.T) {
	tears := []recording.Tear{{Stream: 9, Launch: 4, Kernel: "k"}, {Stream: 11, Launch: 6, Kernel: "m"}}
	for _, c := range []struct {
		status        Status
		before, after []recording.Tear
		want          Status
		why, note     string
	}{
		{StatusDiffers, nil, tears, StatusTorn, "the recorded state after it is torn: stream 9's kernel k (launch 4) ran while it was taken; stream 11's kernel m (launch 6) ran while it was taken; the replay was compared with bytes the launch may not have left: its difference is not the kernel's", ""},
		{StatusDiffers, tears[:1], nil, StatusTorn, "the recorded state before it is torn: stream 9's kernel k (launch 4) ran while it was taken; the replay started from inputs the launch may not have had: its difference is not the kernel's", ""},
		{StatusDiffers, tears[:1], tears[1:], StatusTorn, "the recorded state before it is torn: stream 9's kernel k (launch 4) ran while it was taken; the replay started from inputs the launch may not have had; and the recorded state after it is torn: stream 11's kernel m (launch 6)", ""},
		{StatusNondeterministic, nil, tears[:1], StatusNondeterministic, "two replays disagree", "the recorded state after it is torn: stream 9's kernel k (launch 4)"},
		{StatusExact, tears[:1], nil, StatusExact, "", "the recorded state before it is torn"},
		{StatusDiffers, nil, nil, StatusDiffers, "two replays agree", ""},
	} {
		o := Outcome{Status: c.status}
		if c.status != StatusExact {
			o.Why = map[Status]string{StatusDiffers: "two replays agree", StatusNondeterministic: "two replays disagree"}[c.status]
		}
		judgeTorn(&o, c.before, c.after)
		notes := strings.Join(o.Notes, "\n")
		if o.Status != c.want || !strings.HasPrefix(o.Why, c.why) || c.note == "" && notes != "" || !strings.HasPrefix(notes, c.note) {
			t.Errorf("%s, tears %v %v: %s %q, notes %q; want %s %q, note %q", c.status, c.before, c.after, o.Status, o.Why, notes, c.want, c.why, c.note)
		}
	}
}
