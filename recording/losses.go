package recording

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Loss is a counter of a process's Stats that counts what was lost or failed while it was
// recorded.
type Loss struct {
	Name  string // the Stats field: launches_dropped, modules_failed, memory_states_lost, errors, ...
	Value uint64
}

// Losses lists the counters of s that count something lost or failed (the fields named
// *_dropped, *_failed, *_lost, and errors) and are not zero, in field order. Found by name, so
// a counter added to Stats later is never left out.
func Losses(s *pb.Stats) []Loss {
	var out []Loss
	m := s.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		if !strings.HasSuffix(name, "_dropped") && !strings.HasSuffix(name, "_failed") && !strings.HasSuffix(name, "_lost") && name != "errors" {
			continue
		}
		if fd.Kind() != protoreflect.Uint64Kind || fd.IsList() {
			continue
		}
		if v := m.Get(fd).Uint(); v != 0 {
			out = append(out, Loss{Name: name, Value: v})
		}
	}
	return out
}

// LossWarning says in one line what a process's recording lost or failed to record, by the
// counters of Losses, "" when nothing: the words of every reader that warns about it, as
// Shortfall's are for a recording that ended short.
func LossWarning(name string, s *pb.Stats) string {
	var parts []string
	for _, l := range Losses(s) {
		parts = append(parts, fmt.Sprintf("%s %d", l.Name, l.Value))
	}
	if len(parts) == 0 {
		return ""
	}
	return name + ": lost or failed while recording, so missing here: " + strings.Join(parts, ", ") + " (gpurr info says more)"
}
