package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/gpurr/gpurr/internal/tables"
	"github.com/gpurr/gpurr/recording"
)

// DB is a recording loaded into an in-memory SQLite database.
type DB struct {
	db *sql.DB
	// Warnings says, one line each, what the recording lacks (processes
	// cut short or not closed, or that lost records while recording). The
	// tables hold everything that was written.
	Warnings []string

	chunks  []chunkSource // processes whose memory_chunks rows are not inserted yet (see fillChunks)
	guarded bool          // the read-only authorizer is installed (readonly.go)
	filling bool          // fillChunks is inserting: the authorizer lets it
}

// Load reads every process of set into a new in-memory database.
func Load(ctx context.Context, set *recording.Set) (*DB, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, err
	}
	// Each connection to ":memory:" is a database of its own: keep one.
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	out := &DB{db: db}
	if err := out.load(ctx, set); err != nil {
		db.Close()
		return nil, err
	}
	return out, nil
}

// Close frees the database.
func (db *DB) Close() error { return db.db.Close() }

func (db *DB) load(ctx context.Context, set *recording.Set) error {
	for _, t := range tables.Query {
		if _, err := db.db.ExecContext(ctx, createSQL(t)); err != nil {
			return fmt.Errorf("create table %s: %w", t.Name, err)
		}
	}
	// Every table but memory_chunks, which waits for a statement that
	// names it.
	var load []*tables.Table
	for _, t := range tables.Query {
		if t != tables.MemoryChunks {
			load = append(load, t)
		}
	}
	// One process at a time, streaming: only the rows go into memory.
	err := db.insert(ctx, func(ins *inserter) error {
		for _, p := range set.Processes {
			states := ins.rows["memory_states"]
			insertFailed := false
			res, err := tables.Flatten(p, tables.Options{Tables: load, Row: func(t *tables.Table, values []tables.Value) error {
				if err := ins.row(t, values); err != nil {
					insertFailed = true
					return fmt.Errorf("load %s: %w", p.Name, err)
				}
				return nil
			}})
			if err != nil && (insertFailed || len(set.Processes) == 1) {
				return err
			}
			if err != nil {
				// A damaged rank does not hide the others: its tables hold what came before the damage.
				db.Warnings = append(db.Warnings, fmt.Sprintf("%s: damaged (%v); its tables hold what came before", p.Name, err))
				continue
			}
			if short := recording.Shortfall(p.Name, res.Truncated, res.Complete); short != "" {
				db.Warnings = append(db.Warnings, short)
			}
			if lost := recording.LossWarning(p.Name, res.Stats); lost != "" {
				db.Warnings = append(db.Warnings, lost)
			}
			if ins.rows["memory_states"] > states {
				db.chunks = append(db.chunks, chunkSource{p: p, frames: res.Frames})
			}
		}
		// A process whose events file cannot be read at all (the caller warns of it) still
		// has its row in processes, so that SQL over a job counts every rank.
		for _, d := range set.Damaged {
			var pe *recording.ProcessError
			if !errors.As(d, &pe) {
				continue
			}
			if err := tables.Unreadable(pe.Name, tables.Options{Tables: load, Row: ins.row}); err != nil {
				return fmt.Errorf("load %s: %w", pe.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range tables.Query {
		if q := indexSQL(t); q != "" {
			if _, err := db.db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("index %s: %w", t.Name, err)
			}
		}
	}
	return nil
}

// insert runs fill with an inserter inside one transaction, and commits
// what it inserted unless fill fails.
func (db *DB) insert(ctx context.Context, fill func(*inserter) error) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ins := &inserter{ctx: ctx, tx: tx, stmts: map[*tables.Table]*sql.Stmt{}, rows: map[string]int64{}}
	defer ins.close()
	if err := fill(ins); err != nil {
		return err
	}
	ins.close()
	return tx.Commit()
}

// inserter holds a prepared INSERT per table, made for its first row.
type inserter struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts map[*tables.Table]*sql.Stmt
	rows  map[string]int64 // rows inserted, by table
	args  []any
}

func (in *inserter) row(t *tables.Table, values []tables.Value) error {
	st := in.stmts[t]
	if st == nil {
		var err error
		if st, err = in.tx.PrepareContext(in.ctx, insertSQL(t)); err != nil {
			return fmt.Errorf("prepare %s: %w", t.Name, err)
		}
		in.stmts[t] = st
	}
	in.args = in.args[:0]
	for _, v := range values {
		in.args = append(in.args, v.Any())
	}
	if _, err := st.ExecContext(in.ctx, in.args...); err != nil {
		return fmt.Errorf("insert into %s: %w", t.Name, err)
	}
	in.rows[t.Name]++
	return nil
}

func (in *inserter) close() {
	for t, st := range in.stmts {
		st.Close()
		delete(in.stmts, t)
	}
}
