package probe

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/instrument"
)

// A launch of 264 CTAs on 132 SMs, two waves of 10 µs, where CTA 200 ran 100 µs: Summarize
// names it the slowest, its SM the busiest, and the tail most of the span.
func TestSummarize(t *testing.T) {
	buf := Fill(264)
	for i := range 264 {
		start := uint64(1_000_000 + (i/132)*10_000)
		d := uint64(10_000)
		if i == 200 {
			d = 100_000
		}
		r := buf[i*instrument.ProbeRecordBytes:]
		binary.LittleEndian.PutUint64(r, start)
		binary.LittleEndian.PutUint64(r[8:], start+d)
		binary.LittleEndian.PutUint32(r[16:], uint32(i%132))
		binary.LittleEndian.PutUint64(r[24:], uint64(128+i%3)) // counted instructions run
	}
	ctas, err := Decode(buf)
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(ctas, 3)
	if s.CTAs != 264 || len(s.SMs) != 132 || s.Waves != 2 {
		t.Errorf("%d CTAs on %d SMs, %g waves", s.CTAs, len(s.SMs), s.Waves)
	}
	if s.Slowest[0].Index != 200 || s.Max != 100*time.Microsecond || s.Median != 10*time.Microsecond {
		t.Errorf("slowest %v, max %v, median %v", s.Slowest[0], s.Max, s.Median)
	}
	if s.Span != 110*time.Microsecond || s.StragglerFraction < 0.8 {
		t.Errorf("span %v, tail %.2f", s.Span, s.StragglerFraction)
	}
	if s.Imbalance < 5 {
		t.Errorf("imbalance %.2f: SM 68 was busy 110 µs, the others 20", s.Imbalance)
	}
	if s.Counted != 264*129 || s.CountMedian != 129 || s.CountMax.Count != 130 || s.CountMax.Index != 2 {
		t.Errorf("counted %d, median %d, max %d at CTA %d", s.Counted, s.CountMedian, s.CountMax.Count, s.CountMax.Index)
	}
}

func TestDecodeMissing(t *testing.T) {
	buf := Fill(4)
	binary.LittleEndian.PutUint64(buf, 5)
	binary.LittleEndian.PutUint64(buf[8:], 9)
	ctas, err := Decode(buf)
	if len(ctas) != 1 || err == nil || !strings.Contains(err.Error(), "3 of 4 CTAs left no record") {
		t.Errorf("%v, %v", ctas, err)
	}
	if s := Summarize(nil, 3); s.CTAs != 0 {
		t.Errorf("empty: %+v", s)
	}
}

func TestWriteChrome(t *testing.T) {
	ctas := []CTA{{Index: 0, Start: 1000, End: 3000, SM: 2}, {Index: 1, Start: 1500, End: 9000, SM: 5}}
	var b strings.Builder
	if err := WriteChrome(&b, ctas, "launch 3"); err != nil {
		t.Fatal(err)
	}
	var got struct {
		TraceEvents []struct {
			Name, Ph string
			Tid      uint32
			Ts, Dur  float64
		}
	}
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatal(err)
	}
	var slices, tracks int
	for _, e := range got.TraceEvents {
		switch {
		case e.Ph == "X" && e.Name == "CTA 1":
			slices++
			if e.Tid != 5 || e.Ts != 0.5 || e.Dur != 7.5 {
				t.Errorf("CTA 1: %+v", e)
			}
		case e.Ph == "X":
			slices++
		case e.Name == "thread_name":
			tracks++
		}
	}
	if slices != 2 || tracks != 2 {
		t.Errorf("%d slices on %d SM tracks", slices, tracks)
	}
}
