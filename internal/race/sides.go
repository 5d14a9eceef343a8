package race

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpurr/gpurr/internal/instrument"
)

// A witness's delays name one side of a race; the other is the access that read or wrote the
// same bytes unordered with it, which is what a user fixes. Sides replays the witness once
// more with the access log in (instrument.InjectAccessLog) and pairs what it noted.

// Access is one record of the access log.
type Access struct {
	Addr   uint64
	Instr  int // the instruction's ordinal among the kernel's (ptx.Function.Instructions)
	Store  bool
	Shared bool
	Size   int
	CTA    uint32 // linear index
	Thread uint32 // linear index in its CTA
	Epoch  uint32 // barriers the thread had passed
}

// DecodeAccessLog reads an access log buffer: the records it holds and how many accesses the
// kernel noted, which is more when the buffer was full.
func DecodeAccessLog(buf []byte) (records []Access, noted int, err error) {
	if len(buf) < instrument.AccessHeaderBytes {
		return nil, 0, fmt.Errorf("an access log of %d bytes: shorter than its header", len(buf))
	}
	noted = int(binary.LittleEndian.Uint32(buf))
	n := min(noted, (len(buf)-instrument.AccessHeaderBytes)/instrument.AccessRecordBytes)
	for i := range n {
		r := buf[instrument.AccessHeaderBytes+i*instrument.AccessRecordBytes:]
		flags := binary.LittleEndian.Uint32(r[12:])
		records = append(records, Access{
			Addr:   binary.LittleEndian.Uint64(r),
			Instr:  int(binary.LittleEndian.Uint32(r[8:])),
			Store:  flags&instrument.AccessStore != 0,
			Shared: flags&instrument.AccessShared != 0,
			Size:   int(flags >> 8),
			CTA:    binary.LittleEndian.Uint32(r[16:]),
			Thread: binary.LittleEndian.Uint32(r[20:]),
			Epoch:  binary.LittleEndian.Uint32(r[24:]),
		})
	}
	return records, noted, nil
}

// Conflict is a pair of instructions whose accesses to one address race: one of them stores,
// their threads differ, and no barrier orders them (they are in different CTAs, or in one CTA
// between the same two barriers).
type Conflict struct {
	Store  int  // the storing instruction
	Other  int  // the other: a load, or another store
	Shared bool // on shared memory (the address is in the CTA's window)
	Pairs  int  // pairs of accesses seen
	// An example pair: the address, and the threads (CTA, thread) of the store and the other.
	Addr                  uint64
	StoreCTA, StoreThread uint32
	OtherCTA, OtherThread uint32
}

// maxPerAddress bounds the accesses of one address paired with each other: a hot address
// (a counter every thread bumps) would otherwise cost the square of its accesses.
const maxPerAddress = 256

// Conflicts pairs the log's accesses, most pairs first. Accesses pair by their first byte
// (accesses of different sizes that overlap at another byte are not paired).
func Conflicts(log []Access) []Conflict {
	type key struct {
		shared bool
		cta    uint32 // shared memory is per CTA
		addr   uint64
	}
	groups := map[key][]Access{}
	for _, a := range log {
		k := key{shared: a.Shared, addr: a.Addr}
		if a.Shared {
			k.cta = a.CTA
		}
		if len(groups[k]) < maxPerAddress {
			groups[k] = append(groups[k], a)
		}
	}
	type pair struct {
		store, other int
		shared       bool
	}
	found := map[pair]*Conflict{}
	for _, g := range groups {
		for i, s := range g {
			if !s.Store {
				continue
			}
			for j, o := range g {
				if i == j || (o.Store && j < i) || (o.CTA == s.CTA && o.Thread == s.Thread) {
					continue // a store pair is counted once; a thread is ordered with itself
				}
				if o.CTA == s.CTA && o.Epoch != s.Epoch {
					continue // a barrier between them
				}
				p := pair{s.Instr, o.Instr, s.Shared}
				c := found[p]
				if c == nil {
					c = &Conflict{Store: s.Instr, Other: o.Instr, Shared: s.Shared, Addr: s.Addr,
						StoreCTA: s.CTA, StoreThread: s.Thread, OtherCTA: o.CTA, OtherThread: o.Thread}
					found[p] = c
				}
				c.Pairs++
			}
		}
	}
	out := make([]Conflict, 0, len(found))
	for _, c := range found {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Conflict) int {
		if a.Pairs != b.Pairs {
			return b.Pairs - a.Pairs
		}
		if a.Store != b.Store {
			return a.Store - b.Store
		}
		return a.Other - b.Other
	})
	return out
}

// Sides is what the access log of a witness shows.
type Sides struct {
	Noted     int        // accesses noted
	Kept      int        // of them, in the log (the rest overflowed it)
	Conflicts []Conflict // most pairs first
	Watched   [2]uint64  // the global bytes watched: [from, to)
}

// AccessLogRecords is how many accesses Sides's log holds (32 bytes each: 32 MiB).
const AccessLogRecords = 1 << 20

// Sides replays the witness (points, seed) with the access log in, watching the global bytes
// of the launch's regions, and pairs the accesses. The session goes back to the plain module
// at the next Run.
func (r *ReplayRunner) Sides(points []int, seed uint64) (*Sides, error) {
	if r.session == nil {
		return nil, fmt.Errorf("no session: run the hunt first")
	}
	m, err := r.instrumented(points, true)
	if err != nil {
		return nil, err
	}
	r.loaded = "" // the next Run loads its own module again
	if err := r.session.Reload([]byte(m.String())); err != nil {
		return nil, fmt.Errorf("the access log's module: %w", err)
	}
	// The bytes that changed are often not where the race is (a consumer's output, changed by
	// what it read of a producer's buffer): every region of the launch is watched.
	s := &Sides{Watched: [2]uint64{^uint64(0), 0}}
	for i, reg := range r.Case.Regions {
		base := r.session.Address(i)
		s.Watched[0], s.Watched[1] = min(s.Watched[0], base), max(s.Watched[1], base+reg.Size)
	}
	if s.Watched[0] > s.Watched[1] {
		s.Watched = [2]uint64{}
	}
	words := func(v uint64) []uint32 { return []uint32{uint32(v), uint32(v >> 32)} }
	for name, w := range map[string][]uint32{
		instrument.AccessLogLo:  words(s.Watched[0]),
		instrument.AccessLogHi:  words(s.Watched[1]),
		instrument.AccessLogCap: {AccessLogRecords},
	} {
		if err := r.session.SetGlobal(name, w); err != nil {
			return nil, err
		}
	}
	if len(points) > 0 {
		if err := r.session.SetGlobal(instrument.DelaySeedSymbol, []uint32{instrument.SeedWord(seed)}); err != nil {
			return nil, err
		}
	}
	buf, err := r.session.Probe(r.Case.Recorded(), make([]byte, instrument.AccessHeaderBytes+AccessLogRecords*instrument.AccessRecordBytes))
	if err != nil {
		return nil, err
	}
	log, noted, err := DecodeAccessLog(buf)
	if err != nil {
		return nil, err
	}
	s.Noted, s.Kept, s.Conflicts = noted, len(log), Conflicts(log)
	return s, nil
}
