// Package tables is gpurr's table model: the tables a recording flattens
// into, described once (each table's name and meaning, each column's name,
// type, null rule and meaning), and the one streaming pass that fills them
// (Flatten).
//
// gpurr query loads them into SQLite and gpurr export writes them as
// Parquet: one set of tables, so that SQL written for one runs on the
// other. Both are filled by the same pass over the records, with the same
// joins (recording.Join pairs kernels with the calls that ran them,
// recording.Links resolves ids and graph nodes), so a value such as a
// launch's Python line or a kernel's launch is computed in one place.
// `gpurr query --schema`, the SQLite and Parquet schemas and the column
// lists of docs/query.md are all made from the descriptions (Markdown
// renders them).
//
// Unsigned 64-bit values of the recording (ids, handles) are stored as
// signed 64-bit integers with the same bits: SQLite's integers and
// Parquet's int64 are signed.
package tables

import "unsafe"

// Type is the type of a column's values.
type Type uint8

// The column types, each as SQLite declares it and as Parquet holds it
// (docs/query.md, Types).
const (
	Int64   Type = iota + 1 // INTEGER; Parquet int64
	Boolean                 // BOOLEAN, 1 or 0 (SQLite stores them as integers); Parquet boolean
	String                  // TEXT; Parquet string (UTF-8 byte array)
	Binary                  // BLOB; Parquet binary (byte array)
)

// SQL is the SQLite column type: INTEGER, BOOLEAN, TEXT or BLOB.
func (t Type) SQL() string {
	switch t {
	case Boolean:
		return "BOOLEAN"
	case String:
		return "TEXT"
	case Binary:
		return "BLOB"
	}
	return "INTEGER"
}

// Column is one column of a table.
type Column struct {
	Name string
	Type Type
	// Null says the column may hold NULL (a Parquet optional column). A
	// column without it never does: SQLite declares it NOT NULL, Parquet
	// requires it.
	Null bool
	// Dict says the column holds few distinct values, so Parquet
	// dictionary-encodes it.
	Dict bool
	Doc  string
}

// TypeText is the column's type as docs/query.md and gpurr query --schema
// give it: INTEGER, BOOLEAN, TEXT or BLOB, "or NULL" after one that may be
// NULL.
func (c Column) TypeText() string {
	if c.Null {
		return c.Type.SQL() + " or NULL"
	}
	return c.Type.SQL()
}

// Table is one table: its name, what a row is, and its columns in order.
type Table struct {
	Name string
	Doc  string
	// Key are the columns SQLite indexes, in this order; none when empty.
	Key     []string
	Columns []Column

	id int // index in all
}

// Query are the tables, in the order gpurr query creates and lists them
// and gpurr export writes them. MemoryChunks is among them.
var Query = []*Table{
	processes.Table, devices.Table, modules.Table, kernels.Table, kernelParams.Table, launches.Table,
	gpuActivity.Table, gpurrActivity.Table, copiesTable.Table, syncsTable.Table, hostCallsTable.Table, rangesTable.Table, callstacks.Table, frames.Table, graphNodes.Table, graphLaunches.Table,
	allocations.Table, regions.Table, memoryStates.Table, tornStates.Table, nanCounts.Table, MemoryChunks, writeSetMisses.Table, digests.Table, copyStatesTable.Table,
	probeKernels.Table, probeLaunches.Table, probeCTAs.Table, logs.Table, stats.Table,
}

// MemoryChunks is the Query table of chunk hashes: a row per 64 KiB of
// every region state, millions in a large recording, so gpurr query fills
// it only for a statement that names it.
var MemoryChunks = memoryChunks.Table

// maxColumns is the most columns a table has.
var maxColumns int

func init() {
	for i, t := range Query {
		t.id = i
		maxColumns = max(maxColumns, len(t.Columns))
	}
}

// Value is one value of a row: NULL, an integer (of every integer type,
// and Boolean's 0 or 1), text or bytes. Bytes are held as text without a
// copy (Blob, Bytes): a row's values are read, never changed.
type Value struct {
	s    string
	i    int64
	kind kind
}

type kind uint8

const (
	null kind = iota
	integer
	text
	blob
)

// Null is the NULL value.
var Null = Value{}

type integerType interface {
	~int | ~int32 | ~int64 | ~uint32 | ~uint64
}

// Int is an integer value; an unsigned 64-bit one keeps its bits.
func Int[T integerType](v T) Value { return Value{kind: integer, i: int64(v)} }

// Bool is 1 for true, 0 for false.
func Bool(v bool) Value {
	if v {
		return Value{kind: integer, i: 1}
	}
	return Value{kind: integer}
}

// Text is a text value.
func Text(s string) Value { return Value{kind: text, s: s} }

// Blob is a byte string value. b must not change while the value is used.
func Blob(b []byte) Value { return Value{kind: blob, s: unsafe.String(unsafe.SliceData(b), len(b))} }

// IsNull reports whether v is NULL.
func (v Value) IsNull() bool { return v.kind == null }

// Int64 is an integer value, 0 for any other.
func (v Value) Int64() int64 {
	if v.kind != integer {
		return 0
	}
	return v.i
}

// Str is a text value (a byte string value's bytes as text), "" for NULL
// and integers.
func (v Value) Str() string { return v.s }

// Bytes is a byte string value, nil for any other and for an empty one;
// it must not be changed.
func (v Value) Bytes() []byte {
	if v.kind != blob || v.s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(v.s), len(v.s))
}

// Any is v as database/sql takes it: nil, int64, string or []byte.
func (v Value) Any() any {
	switch v.kind {
	case integer:
		return v.i
	case text:
		return v.s
	case blob:
		if v.s == "" {
			return []byte{} // an empty BLOB: nil would be NULL
		}
		return v.Bytes()
	}
	return nil
}
