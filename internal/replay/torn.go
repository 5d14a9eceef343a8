package replay

import (
	"fmt"
	"strings"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Tears gives the kernels of other streams that ran while gpurr took launch seq's states
// before and after it (recording.Data.TornStates), nil for a state nothing tore. The
// process's torn states are found once, on the first call.
func (s *Source) Tears(seq uint64) (before, after []recording.Tear) {
	torn := s.torn()
	return torn[recording.StateKey{Seq: seq, Point: pb.MemoryState_BEFORE}], torn[recording.StateKey{Seq: seq, Point: pb.MemoryState_AFTER}]
}

// TornState says that the state at point ("before", "after") is torn, and by which kernels:
// "the recorded state after it is torn: stream 9's kernel K (launch 4) ran while it was taken".
func TornState(point string, tears []recording.Tear) string {
	return fmt.Sprintf("the recorded state %s it is torn: %s", point, recording.JoinTears(tears))
}

// judgeTorn revises o's verdict where a state it was replayed from (before) or compared with
// (after) is torn: its bytes may be part from before another stream's kernel wrote, part from
// after. A replay that differs from such a recording says nothing about the kernel: it is
// StatusTorn, and Why says which state and why. The other verdicts stand, with a note: a
// match, or two replays that disagree with each other, hold whatever the recorded bytes are.
func judgeTorn(o *Outcome, before, after []recording.Tear) {
	var says []string
	if len(before) > 0 {
		says = append(says, TornState("before", before)+"; the replay started from inputs the launch may not have had")
	}
	if len(after) > 0 {
		says = append(says, TornState("after", after)+"; the replay was compared with bytes the launch may not have left")
	}
	if len(says) == 0 {
		return
	}
	if o.Status == StatusDiffers {
		o.Status, o.Why = StatusTorn, strings.Join(says, "; and ")+": its difference is not the kernel's"
		return
	}
	o.Notes = append(o.Notes, says...)
}
