package query

import (
	"context"
	"fmt"
	"regexp"

	"github.com/gpurr/gpurr/internal/tables"
	"github.com/gpurr/gpurr/recording"
)

// memory_chunks is filled only when a statement names it. A region is a
// whole allocation, so a recording of a large program holds millions of
// chunk hashes: at a few microseconds per SQLite row they would make every
// query slow, and most queries never look at them. Nor are they kept in
// memory until then: the statement that names the table reads the
// processes that have memory states again, as far as Load read them.
var namesChunks = regexp.MustCompile(`(?i)\b` + tables.MemoryChunks.Name + `\b`)

// chunkSource is a process whose chunk hashes are not in memory_chunks yet,
// and the frames Load read of it.
type chunkSource struct {
	p      *recording.Process
	frames int
}

// fillChunks inserts the memory_chunks rows, once, before the first
// statement that names the table.
func (db *DB) fillChunks(ctx context.Context, statement string) error {
	if len(db.chunks) == 0 || !namesChunks.MatchString(statement) {
		return nil
	}
	db.filling = true
	defer func() { db.filling = false }()
	err := db.insert(ctx, func(ins *inserter) error {
		for _, c := range db.chunks {
			o := tables.Options{Tables: []*tables.Table{tables.MemoryChunks}, Row: ins.row, Frames: c.frames}
			if _, err := tables.Flatten(c.p, o); err != nil {
				return fmt.Errorf("load %s of %s: %w", tables.MemoryChunks.Name, c.p.Name, err)
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
