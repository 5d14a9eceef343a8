package replay

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// addressWindow is the alignment and size unit of the address ranges replay
// reserves. Measured on the GPU machine (H200, driver 580): the driver
// ignores the address asked for by a reservation of 2 MiB at most places,
// and grants it for one of 32 MiB aligned to 32 MiB.
const addressWindow = 32 << 20

// span is one address range replay reserves: the window-aligned cover of
// one or more regions. Inside it, only pieces (the granule-aligned covers
// of its regions, merged) get device memory.
type span struct {
	start, end uint64
	regions    []int // indexes into Case.Regions
	pieces     [][2]uint64
}

// planSpans covers c's regions with window-aligned spans, merging regions
// whose covers overlap, and lists each span's granule-aligned pieces.
func planSpans(c *Case, granule uint64) []span {
	var spans []span
	for _, i := range c.sortedRegions() {
		r := c.Regions[i]
		lo, hi := alignDown(r.Address, addressWindow), alignUp(r.Address+r.Size, addressWindow)
		plo, phi := alignDown(r.Address, granule), alignUp(r.Address+r.Size, granule)
		n := len(spans)
		if n == 0 || lo >= spans[n-1].end {
			spans = append(spans, span{start: lo, end: hi, regions: []int{i}, pieces: [][2]uint64{{plo, phi}}})
			continue
		}
		sp := &spans[n-1]
		sp.end = max(sp.end, hi)
		sp.regions = append(sp.regions, i)
		if last := &sp.pieces[len(sp.pieces)-1]; plo <= last[1] {
			last[1] = max(last[1], phi)
		} else {
			sp.pieces = append(sp.pieces, [2]uint64{plo, phi})
		}
	}
	return spans
}

func alignDown(v, a uint64) uint64 { return v / a * a }
func alignUp(v, a uint64) uint64   { return (v + a - 1) / a * a }

// relocate returns params with every word that points into region i moved
// by addrs[i]-Regions[i].Address, and how many words it changed.
func relocate(c *Case, params []byte, addrs []uint64) ([]byte, int, error) {
	out := slices.Clone(params)
	moved := 0
	for i, r := range c.Regions {
		delta := addrs[i] - r.Address
		if delta == 0 {
			continue
		}
		for _, off := range r.ParamOffsets {
			if int(off)+8 > len(out) {
				return nil, 0, fmt.Errorf("region %d: parameter word at byte %d is past the %d-byte parameter buffer", i, off, len(out))
			}
			w := binary.LittleEndian.Uint64(out[off:])
			if w < r.Address || w-r.Address >= r.Size {
				return nil, 0, fmt.Errorf("region %d: parameter word at byte %d holds 0x%x, outside the region", i, off, w)
			}
			binary.LittleEndian.PutUint64(out[off:], w+delta)
			moved++
		}
	}
	return out, moved, nil
}

// pointerWords counts, for region i, the 8-byte-aligned words of its
// contents before the launch that hold an address inside one of the
// launch's regions, by the region they point into. Such words are pointers
// a kernel may follow (arrays of pointers, structs in device memory);
// replay cannot tell them from data, so it does not move them.
func pointerWords(c *Case, i int) map[int]int {
	order := c.sortedRegions()
	lo, hi := c.Regions[order[0]].Address, uint64(0)
	for _, r := range c.Regions {
		hi = max(hi, r.Address+r.Size)
	}
	counts := map[int]int{}
	b := c.Regions[i].Before
	for off := 0; off+8 <= len(b); off += 8 {
		w := binary.LittleEndian.Uint64(b[off:])
		if w < lo || w >= hi {
			continue // the common case: data, not an address in range
		}
		j, _ := slices.BinarySearchFunc(order, w, func(idx int, a uint64) int {
			r := c.Regions[idx]
			switch {
			case r.Address+r.Size <= a:
				return -1
			case r.Address > a:
				return 1
			}
			return 0
		})
		if j < len(order) {
			if r := c.Regions[order[j]]; w >= r.Address && w < r.Address+r.Size {
				counts[order[j]]++
			}
		}
	}
	return counts
}
