package replay

import (
	"bytes"
	"hash/maphash"
	"math"
	"slices"

	"github.com/gpurr/gpurr/internal/dtype"
)

// Check says how outputs are compared with the recording: bit for bit,
// or, with a Type, element by element within a tolerance.
type Check struct {
	Type       *dtype.Type // nil: bytes only
	Atol, Rtol float64     // with Type: |got-want| <= Atol + Rtol·|want|
	Elements   int         // with Type: how many differing elements to list per region
}

// RegionResult is how one region came out against the recording.
type RegionResult struct {
	Index           int
	Identical       bool // every compared byte equals the recording
	Chunks          int  // chunks compared
	Missing         int  // chunks not compared: dropped while recording
	DifferingChunks int
	FirstDiff       int64 // byte offset of the first difference, -1 when identical
	// With Check.Type:
	DifferingElements int
	Outside           int // elements outside the tolerance
	MaxAbs, MaxRel    float64
	Elements          []dtype.Element // the first differing elements (A: replay, B: recording)
	// Output fingerprints the replayed bytes within this process, so two
	// runs can tell whether they agree with each other; 0 when the region
	// is identical to the recording (two such runs agree).
	Output uint64
}

// outputSeed keys Output; fingerprints compare only within one process.
var outputSeed = maphash.MakeSeed()

// Within reports whether the region matches the recording under the check:
// identical, or with a Type every element within the tolerance.
func (r RegionResult) Within(c Check) bool {
	return r.Identical || (c.Type != nil && r.Outside == 0)
}

// compare compares got (the region after the replayed launch) with the
// recorded after-contents, chunk by chunk.
func compare(i int, reg *Region, got []byte, c Check) RegionResult {
	res := RegionResult{Index: i, Identical: true, FirstDiff: -1}
	want := reg.After
	for ci := 0; uint64(ci)*reg.ChunkBytes < reg.Size; ci++ {
		if slices.Contains(reg.AfterMissing, ci) {
			res.Missing++
			continue
		}
		lo := uint64(ci) * reg.ChunkBytes
		hi := min(lo+reg.ChunkBytes, reg.Size)
		res.Chunks++
		g, w := got[lo:hi], want[lo:hi]
		if bytes.Equal(g, w) {
			continue
		}
		res.DifferingChunks++
		if res.Identical {
			res.Identical = false
			res.Output = maphash.Bytes(outputSeed, got)
			for k := range g {
				if g[k] != w[k] {
					res.FirstDiff = int64(lo) + int64(k)
					break
				}
			}
		}
		if c.Type == nil {
			continue
		}
		// Elements straddling a chunk edge are rare (chunks are 64 KiB and
		// element sizes divide that); element indexes stay region-wide.
		d, out, maxAbs, maxRel := c.Type.Errors(g, w, c.Atol, c.Rtol)
		res.DifferingElements += d
		res.Outside += out
		switch {
		case math.IsNaN(maxAbs) || math.IsNaN(res.MaxAbs):
			res.MaxAbs, res.MaxRel = math.NaN(), math.NaN()
		default:
			res.MaxAbs, res.MaxRel = max(res.MaxAbs, maxAbs), max(res.MaxRel, maxRel)
		}
		if len(res.Elements) < c.Elements {
			res.Elements = append(res.Elements, c.Type.Compare(g, w, lo, c.Elements-len(res.Elements))...)
		}
	}
	return res
}
