package info

import (
	"errors"
	"fmt"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// ChunkCheck is what reading every chunk of a process's chunk store found (gpurr info --check).
type ChunkCheck struct {
	Chunks int        `json:"chunks"` // chunks the store holds, each read
	Bad    []BadChunk `json:"bad,omitempty"`
}

// BadChunk is a chunk that could not be read, or whose bytes do not hash to its name.
type BadChunk struct {
	Hash  string `json:"hash"`
	Error string `json:"error"`
	// Refs names, at most maxRefs, the states that hold the chunk: "launch 7 after, region 1".
	Refs []string `json:"referenced_by,omitempty"`
	// MoreRefs counts the states that hold it beyond Refs.
	MoreRefs int `json:"more_references,omitempty"`
}

const maxRefs = 3

// CheckChunks reads every chunk of each process's chunk store and checks it against its name
// (chunkstore.Reader.Get checks its CRC and its gpurr-h128 hash), setting Process.Chunks;
// progress, when not nil, is told each process's count as it goes. A process without a
// chunk store (one not recorded in snapshot mode) is left without. The chunks of a bad one
// are named with the states that hold them, which takes a second read of its events.
func (r *Report) CheckChunks(set *recording.Set, progress func(process string, done, total int)) error {
	for _, p := range set.Processes {
		var proc *Process
		for _, rp := range r.Processes {
			if rp.Name == p.Name && rp.Damaged == "" {
				proc = rp
			}
		}
		if proc == nil {
			continue
		}
		check, err := checkChunks(p, func(done, total int) {
			if progress != nil {
				progress(p.Name, done, total)
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		proc.Chunks = check
	}
	return nil
}

func checkChunks(p *recording.Process, progress func(done, total int)) (*ChunkCheck, error) {
	store, err := chunkstore.Open(p.Dir)
	if errors.Is(err, chunkstore.ErrNoChunks) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer store.Close()
	c := &ChunkCheck{Chunks: store.Len()}
	bad := map[[16]byte]int{}
	done := 0
	for h := range store.Hashes() {
		if _, err := store.Get(h); err != nil {
			bad[h] = len(c.Bad)
			c.Bad = append(c.Bad, BadChunk{Hash: recording.HashText(h[:]), Error: err.Error()})
		}
		done++
		if done%256 == 0 || done == c.Chunks {
			progress(done, c.Chunks)
		}
	}
	if len(bad) == 0 {
		return c, nil
	}
	_, err = p.Scan(func(b *pb.Batch) error {
		for _, s := range b.GetMemory() {
			if !s.GetSnapshot() {
				continue
			}
			for i, rs := range s.GetRegions() {
				for _, h := range recording.ChunkHashes(rs) {
					j, ok := bad[[16]byte(h)]
					if !ok {
						continue
					}
					if bc := &c.Bad[j]; len(bc.Refs) < maxRefs {
						bc.Refs = append(bc.Refs, fmt.Sprintf("launch %d %s, region %d", s.GetLaunchSeq(), recording.EnumText(s.GetPoint()), i))
					} else {
						bc.MoreRefs++
					}
				}
			}
		}
		return nil
	})
	return c, err
}

// write writes what --check found: the bad chunks as problems, else one line.
func (c *ChunkCheck) write(t *textWriter) {
	if c == nil {
		return
	}
	if len(c.Bad) == 0 {
		t.field("chunks", "%s read, each hashes to its name", Count(c.Chunks, "chunk"))
		return
	}
	t.printf("  !! CHUNKS DAMAGED: %d of the store's %s cannot be read or do not hash to their name\n", len(c.Bad), Count(c.Chunks, "chunk"))
	for i, b := range c.Bad {
		if i == maxRefs {
			t.printf("       and %d more (--format json lists them all)\n", len(c.Bad)-i)
			break
		}
		where := "held by no state"
		if len(b.Refs) > 0 {
			where = "held by " + Few(b.Refs, "; ")
			if b.MoreRefs > 0 {
				where += fmt.Sprintf(" and %d more", b.MoreRefs)
			}
		}
		t.printf("       %s (%s): %s\n", b.Hash, where, b.Error)
	}
}
