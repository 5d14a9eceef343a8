package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/gpurr/gpurr/internal/tables"
	"github.com/gpurr/gpurr/recording"
)

// DB is a recording loaded into a temporary SQLite database (tempdb.go).
type DB struct {
	db *sql.DB
	// Warnings says, one line each, what the recording lacks (processes
	// cut short or not closed, or that lost records while recording). The
	// tables hold everything that was written.
	Warnings []string

	chunksFilled bool // memory_chunks holds its rows (see fillChunks)
	guarded      bool // the read-only authorizer is installed (readonly.go)
	filling      bool // fillChunks or fillTables is inserting: the authorizer lets it

	// What fillTables and fillChunks read again for a table Load left empty: every process of
	// the set, as far as Load read it, and those it could not read at all.
	read       []source
	unreadable []string
	empty      map[*tables.Table]bool // tables Load did not fill, memory_chunks aside
}

// source is a process Load read: the frames it read, and whether it was damaged part way
// (its tables hold what came before the damage).
type source struct {
	p       *recording.Process
	frames  int
	damaged bool
}

// Load reads every process of set into a new temporary database, once, frame by frame. Every
// table is created, but only those that one of the statements given names are filled (all of
// them when none is given), so that a statement over one table does not wait for millions of
// rows of others; a later statement that names a table left empty fills it first (fillTables),
// by reading the recording again. memory_chunks waits for a statement that names it in either
// case (fillChunks).
func Load(ctx context.Context, set *recording.Set, statements ...string) (*DB, error) {
	db, err := openTemp()
	if err != nil {
		return nil, err
	}
	out := &DB{db: db, empty: map[*tables.Table]bool{}}
	if err := out.load(ctx, set, statements); err != nil {
		db.Close()
		return nil, diskFull(err)
	}
	return out, nil
}

// Close frees the database and its file.
func (db *DB) Close() error { return db.db.Close() }

func (db *DB) load(ctx context.Context, set *recording.Set, statements []string) error {
	for _, t := range tables.Query {
		if _, err := db.db.ExecContext(ctx, createSQL(t)); err != nil {
			return fmt.Errorf("create table %s: %w", t.Name, err)
		}
	}
	load := named(statements)
	for _, d := range set.Damaged {
		if pe := (*recording.ProcessError)(nil); errors.As(d, &pe) {
			db.unreadable = append(db.unreadable, pe.Name)
		}
	}
	// One process at a time, streaming: only the rows go into memory.
	err := db.insert(ctx, func(ins *inserter) error {
		for _, p := range set.Processes {
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
			db.read = append(db.read, source{p: p, frames: res.Frames, damaged: err != nil})
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
			if res.RangePaths != "" {
				db.Warnings = append(db.Warnings, res.RangePaths)
			}
		}
		return db.addUnreadable(ins, load)
	})
	if err != nil {
		return err
	}
	for _, t := range tables.Query {
		if t != tables.MemoryChunks && !slices.Contains(load, t) {
			db.empty[t] = true
		}
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

// addUnreadable inserts the rows of processes whose events file cannot be read at all (the
// caller warns of them): their row in processes, if load has it, so that SQL over a job counts
// every rank.
func (db *DB) addUnreadable(ins *inserter, load []*tables.Table) error {
	for _, name := range db.unreadable {
		if err := tables.Unreadable(name, tables.Options{Tables: load, Row: ins.row}); err != nil {
			return fmt.Errorf("load %s: %w", name, err)
		}
	}
	return nil
}

// fillTables fills, once, the tables that statement names and Load left empty, reading every
// process again as far as Load read it: their rows are those Load would have inserted.
func (db *DB) fillTables(ctx context.Context, statement string) error {
	var fill []*tables.Table
	for _, t := range named([]string{statement}) {
		if db.empty[t] {
			fill = append(fill, t)
		}
	}
	if len(fill) == 0 {
		return nil
	}
	db.filling = true
	defer func() { db.filling = false }()
	err := db.insert(ctx, func(ins *inserter) error {
		for _, s := range db.read {
			// A damaged process fails again where Load's pass did, after the same rows.
			o := tables.Options{Tables: fill, Row: ins.row, Frames: s.frames}
			if _, err := tables.Flatten(s.p, o); err != nil && !s.damaged {
				return fmt.Errorf("load %s: %w", s.p.Name, err)
			}
		}
		return db.addUnreadable(ins, fill)
	})
	if err != nil {
		return err
	}
	for _, t := range fill {
		delete(db.empty, t)
	}
	return nil
}

// everyTable marks a statement that reads what every table's filling changes, not only the
// tables it names: SQLite's page layout (the dbstat and sqlite_dbpage tables, and EXPLAIN,
// whose program names the pages indexes start at).
func everyTable(statement string) bool {
	return pageTables.MatchString(statement) || strings.EqualFold(firstWord(statement), "EXPLAIN")
}

var pageTables = regexp.MustCompile(`(?i)\b(dbstat|sqlite_dbpage)\b`)

// named is the tables the statements name, memory_chunks aside: every table when no statement
// is given, or one reads SQLite's pages (everyTable). A table name in a string or comment
// counts too: a table is filled for nothing, never left empty for a statement that reads it.
func named(statements []string) []*tables.Table {
	var out []*tables.Table
	for _, t := range tables.Query {
		if t == tables.MemoryChunks {
			continue
		}
		name := regexp.MustCompile(`(?i)\b` + t.Name + `\b`)
		for _, st := range statements {
			if name.MatchString(st) || everyTable(st) {
				out = append(out, t)
				break
			}
		}
		if len(statements) == 0 {
			out = append(out, t)
		}
	}
	return out
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
