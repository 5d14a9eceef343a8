package query

import (
	"context"
	"fmt"
	"regexp"

	"github.com/gpurr/gpurr/internal/tables"
)

// memory_chunks is filled only when a statement names it. A region is a
// whole allocation, so a recording of a large program holds millions of
// chunk hashes: at a few microseconds per SQLite row they would make every
// query slow, and most queries never look at them. Nor are they kept in
// memory until then: the statement that names the table reads the
// processes Load read whole again, as far as Load read them (a process
// without memory states gives no rows).
var namesChunks = regexp.MustCompile(`(?i)\b` + tables.MemoryChunks.Name + `\b`)

// fillChunks inserts the memory_chunks rows, once, before the first
// statement that names the table.
func (db *DB) fillChunks(ctx context.Context, statement string) error {
	if db.chunksFilled || !namesChunks.MatchString(statement) {
		return nil
	}
	db.filling = true
	defer func() { db.filling = false }()
	err := db.insert(ctx, func(ins *inserter) error {
		for _, s := range db.read {
			if s.damaged {
				continue // its tables hold what came before the damage, but for chunk hashes
			}
			o := tables.Options{Tables: []*tables.Table{tables.MemoryChunks}, Row: ins.row, Frames: s.frames}
			if _, err := tables.Flatten(s.p, o); err != nil {
				return fmt.Errorf("load %s of %s: %w", tables.MemoryChunks.Name, s.p.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	db.chunksFilled = true
	return nil
}
