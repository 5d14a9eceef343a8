package info

import (
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Hang is what gpurr record --hang-timeout found (format 1.13): a launch the GPU had not
// finished that long after it was made, and the other streams' unfinished launches, each
// named by the line that made it, as the agent reported them on the program's stderr.
type Hang struct {
	AtNS     uint64   `json:"at_ns"` // since the process started recording
	TimeoutS float64  `json:"timeout_s"`
	Launch   uint64   `json:"launch"`           // the seq of the launch that hangs
	Report   []string `json:"report"`           // recording.HangReport: that launch first, then one a stream
	Killed   bool     `json:"killed,omitempty"` // --hang-kill ended the program
}

// newHang names the launches of a Hang record from the records links holds: their kernels,
// and the lines of their callstacks, which came in earlier frames.
func newHang(h *pb.Hang, links *recording.Links, start uint64) *Hang {
	if h == nil {
		return nil
	}
	return &Hang{AtNS: since(start, h.GetHostNs()), TimeoutS: float64(h.GetTimeoutNs()) / 1e9, Launch: h.GetLaunch().GetSeq(),
		Report: links.HangReport(h), Killed: h.GetKilled()}
}

// write says, loud, that the program hung, and where.
func (h *Hang) write(t *textWriter) {
	if h == nil {
		return
	}
	ended := "the program went on"
	if h.Killed {
		ended = "gpurr ended the program (--hang-kill)"
	}
	t.printf("  !! HANG at +%s: a launch had not finished on the GPU %gs after it was made (--hang-timeout); %s:\n",
		formatNS(h.AtNS), h.TimeoutS, ended)
	for _, line := range h.Report {
		t.printf("       %s\n", line)
	}
}
