package query

import (
	"cmp"
	"context"
	"fmt"
	"regexp"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// chunksTable is filled only when a statement names it. A region is a
// whole allocation, so a recording of a large program holds millions of
// chunk hashes: at a few microseconds per SQLite row they would make every
// query slow, and most queries never look at them.
const chunksTable = "memory_chunks"

var namesChunks = regexp.MustCompile(`(?i)\b` + chunksTable + `\b`)

// stateChunks are one process's memory states whose chunk hashes are not
// in memory_chunks yet. Kept as the records hold them, 16 bytes a chunk.
type stateChunks struct {
	process    string
	chunkBytes uint64
	states     []*pb.MemoryState
}

// keepChunks keeps d's memory states for memory_chunks.
func (db *DB) keepChunks(process string, d *recording.Data) {
	if len(d.Memory) == 0 {
		return
	}
	chunkBytes := cmp.Or(d.Process.GetMemory().GetChunkBytes(), memhash.ChunkSize)
	db.chunks = append(db.chunks, stateChunks{process: process, chunkBytes: uint64(chunkBytes), states: d.Memory})
}

// fillChunks inserts the memory_chunks rows, once, before the first
// statement that names the table.
func (db *DB) fillChunks(ctx context.Context, statement string) error {
	if len(db.chunks) == 0 || !namesChunks.MatchString(statement) {
		return nil
	}
	err := db.insert(ctx, func(ins *inserter) error {
		for _, c := range db.chunks {
			for _, st := range c.states {
				seq, point := u(st.GetLaunchSeq()), recording.EnumText(st.GetPoint())
				for i, rs := range st.GetRegions() {
					for n, h := range recording.ChunkHashes(rs) {
						ins.row(chunksTable, c.process, seq, point, int64(i), int64(n), u(uint64(n)*c.chunkBytes), recording.HashText(h))
					}
				}
			}
			if ins.err != nil {
				return fmt.Errorf("load %s of %s: %w", chunksTable, c.process, ins.err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	db.chunks = nil
	return nil
}
