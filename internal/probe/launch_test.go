package probe

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Launch 2 of the replayable recording ran without live probes when recorded, but has
// snapshots: Live leaves it to a replay; launch 3, captured, cannot be replayed, and Live says
// both why.
func TestLiveProbeSkipped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := replay.Open(set.Processes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if p, err := Live(src, 2, false); p != nil || err != nil {
		t.Errorf("launch 2: %v, %v; want a replay", p, err)
	}
	src.Data.ProbeResults = append(src.Data.ProbeResults, &pb.ProbeResult{LaunchSeq: 3, Skipped: "captured"})
	_, err = Live(src, 3, false)
	if err == nil || !strings.Contains(err.Error(), "launch 3 ran without probes when recorded (captured), and cannot be replayed: launch 3 was captured") {
		t.Errorf("launch 3: %v", err)
	}
}

func TestProbeSummaryText(t *testing.T) {
	buf := Fill(8)
	for i := range 8 {
		d := uint64(1000)
		if i == 5 {
			d = 9000
		}
		r := buf[i*instrument.ProbeRecordBytes:]
		binary.LittleEndian.PutUint64(r, 100)
		binary.LittleEndian.PutUint64(r[8:], 100+d)
		binary.LittleEndian.PutUint32(r[16:], uint32(i%4))
		binary.LittleEndian.PutUint64(r[24:], uint64(10*i))
	}
	ctas, err := Decode(buf)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum := Summarize(ctas, 2)
	sum.WriteText(&out, cuda.Dim3{X: 4, Y: 2, Z: 1})
	sum.WriteCounts(&out, "global-store", 3)
	for _, want := range []string{"8 CTAs, span 9.0 µs; CTA duration median 1.0 µs", "SMs: 4 used, 2.0 waves",
		"busiest SM 1: 2 CTAs, 10.0 µs busy", "       5  (1,1,0)              1  9.0 µs",
		"count of global-store (3 instructions in the kernel): 280 run in all; per CTA median 40, max 70 (CTA 7)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// SumLive's report (probe --all) names kernels, and why launches ran without probes, as the
// recording has them: escaped.
func TestProbeAllEscapesControls(t *testing.T) {
	var out bytes.Buffer
	(&LiveKernel{name: "k" + testrec.Hostile, skipped: map[string]int{"why" + testrec.Hostile: 1}}).WriteText(&out)
	if s := out.String(); strings.ContainsAny(s, "\x1b\x07\r") || strings.Contains(s, "\ngpurr: FORGED") || !strings.Contains(s, `k\x1b]0;owned\a`) {
		t.Errorf("probe --all's report:\n%q", s)
	}
}
