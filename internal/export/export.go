// Package export writes gpurr recordings as Parquet tables, so that Spark,
// Trino, DuckDB or pandas can query the recordings of a job larger than
// one machine can load (gpurr query reads one recording into SQLite).
//
// The tables are gpurr query's, tables.Query: the same names, columns,
// types, null rules and rows, so that SQL written for one runs on the other
// (docs/query.md lists every column). Each table is a folder; inside it,
// files are partitioned by host and rank the way Hive lays out tables
// (table/host=H/rank=R/PROCESS.parquet), so engines prune by host and rank
// and add both as columns: the only columns gpurr query has not. Every
// process has a file in every table, empty or not, so that every table
// can be read by name.
//
// Parquet reads each process's recording once, streaming (tables.Flatten),
// and writes each table's rows in row groups as they come. The Go row
// types of rows_gen.go, made from the descriptions, let parquet-go write
// them column by column.
package export

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/internal/tables"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Tables names the tables, in the order Parquet writes them: gpurr query's.
var Tables = func() []string {
	var names []string
	for _, t := range tables.Query {
		names = append(names, t.Name)
	}
	return names
}()

// Stats counts the rows written to each table, and the files.
type Stats struct {
	Rows  map[string]int64
	Files int
	// Shortfalls says, one line each, which recordings ended short (recording.Shortfall):
	// their tables hold what was written before; and which lost or failed to record
	// something (recording.LossWarning); and whose NVTX range paths were shortened
	// (recording.Ranges.PathWarning).
	Shortfalls []string
}

// Partition is the folder, below a table's, that holds a process's file:
// host=H/rank=R, R -1 for a process without a RANK.
func Partition(p *pb.Process) string {
	rank := int32(-1)
	if p.Rank != nil {
		rank = p.GetRank()
	}
	host := strings.Map(func(r rune) rune {
		if r == '/' || r == '=' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, p.GetHostname())
	if host == "" || host == "." || host == ".." {
		host = "_"
	}
	return filepath.Join("host="+host, fmt.Sprintf("rank=%d", rank))
}

// Parquet writes the processes' recordings into dir, which must not exist
// or be empty, and the processes row of each process named in unreadable,
// whose events file cannot be read at all (recording.Set.Damaged), as
// gpurr query has it (tables.Unreadable). An error (reading a recording,
// which it names, or writing) leaves dir as it found it, so the same
// command can run again.
func Parquet(dir string, procs []*recording.Process, unreadable ...string) (Stats, error) {
	st := Stats{Rows: map[string]int64{}}
	if err := outdir.Check(dir); err != nil {
		return st, err
	}
	if err := oneFileEach(procs, unreadable); err != nil {
		return st, err
	}
	undo := outdir.Track(dir)
	var claimed string
	release, err := outdir.Undoable(func() (func(), error) { // an interrupt undoes the export
		var err error
		claimed, err = claim(dir)
		return undo, err
	})
	if err != nil {
		return st, err
	}
	defer release()
	for _, p := range procs {
		if err := exportProcess(dir, p, &st, len(procs) == 1); err != nil {
			undo()
			return st, err
		}
	}
	for _, name := range unreadable {
		if err := exportUnreadable(dir, name, &st); err != nil {
			undo()
			return st, err
		}
	}
	return st, os.Remove(claimed)
}

// processFile is where a process's rows go below each table's folder.
func processFile(info *pb.Process, name string) string {
	return filepath.Join(Partition(info), name+".parquet")
}

// oneFileEach refuses processes that would write the same files: processes of two recordings
// with one name, host and rank (two runs of a job in containers, where pids repeat). The
// second would replace the first's files, and their rows could not be told apart.
func oneFileEach(procs []*recording.Process, unreadable []string) error {
	seen := make(map[string]string, len(procs)+len(unreadable))
	add := func(file, dir string) error {
		if first, ok := seen[file]; ok {
			return fmt.Errorf("%s and %s would write the same files (TABLE/%s): export them into separate folders", first, dir, file)
		}
		seen[file] = dir
		return nil
	}
	for _, p := range procs {
		if err := add(processFile(p.Info, p.Name), p.Dir); err != nil {
			return err
		}
	}
	for _, name := range unreadable {
		if err := add(processFile(tables.NameInfo(name), name), name); err != nil {
			return err
		}
	}
	return nil
}

// claimFile marks a folder an export is writing, so that of two exports into one folder at
// once one goes on and the other fails before it writes: it would otherwise write the same
// files, and its undo on failing remove the first one's.
const claimFile = ".gpurr-export-in-progress"

// claim makes dir if need be and claims it with claimFile, made only once, and then only
// where dir holds nothing else: the folder is looked at once the claim is made, since an
// export that was not yet claiming it when it was looked at before may since have written it
// whole and gone. A failure leaves nothing of this export's there: a folder it made is removed
// when still empty.
func claim(dir string) (string, error) {
	_, err := os.Lstat(dir)
	made := errors.Is(err, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, claimFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("%s is not empty (another export is writing it): export into a new folder", dir)
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = onlyClaim(dir)
	}
	if err != nil {
		os.Remove(path)
		if made {
			os.Remove(dir) // only when empty: never what another export wrote
		}
		return "", err
	}
	return path, nil
}

// onlyClaim fails unless claimFile is all that dir holds.
func onlyClaim(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != claimFile {
			return fmt.Errorf("%s is not empty: export into a new folder", dir)
		}
	}
	return nil
}

// createFile makes each Parquet file and the folders above it, through outdir.Add: the writer
// goroutine may still be writing when an interrupt's undo runs, and would otherwise make them
// again after the undo removed the folder. A test makes one fail, as a full disk would, or
// interrupts the export before one.
var createFile = func(path string) (f *os.File, err error) {
	err = outdir.Add(func() error {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f, err = os.Create(path)
		return err
	})
	return f, err
}

// exportProcess writes one process's tables, a file in each. Its recording is read and
// flattened on this goroutine while another writes the rows (Parquet's
// encoding and compression take as long as the reading): batches of rows
// go from one to the other through a short queue, so memory stays bounded.
// A recording that cannot be read to its end, of a process among others,
// leaves its tables with what came before the damage and a shortfall: one
// damaged rank does not hide the others. Alone, it is an error.
func exportProcess(dir string, p *recording.Process, st *Stats, alone bool) (err error) {
	files := make(map[*tables.Table]tableFile, len(tables.Query))
	for _, t := range tables.Query {
		files[t] = newTableFile(t, filepath.Join(dir, t.Name, processFile(p.Info, p.Name)), st)
	}
	defer func() {
		if err != nil {
			for _, f := range files {
				f.abort()
			}
		}
	}()
	w := startWriter()
	sendFailed := false
	res, ferr := tables.Flatten(p, tables.Options{Tables: tables.Query, Row: func(t *tables.Table, values []tables.Value) error {
		if write := files[t].add(values); write != nil {
			if err := w.send(write); err != nil {
				sendFailed = true
				return err
			}
		}
		return nil
	}})
	damaged := ""
	if ferr != nil && !sendFailed && !alone {
		damaged = fmt.Sprintf("%s: damaged (%v); its tables hold what came before", p.Name, ferr)
		ferr = nil
	}
	for _, t := range tables.Query {
		if ferr != nil {
			break
		}
		if write := files[t].take(); write != nil {
			ferr = w.send(write)
		}
	}
	if werr := w.wait(); werr != nil {
		return werr
	}
	if ferr != nil {
		return ferr
	}
	// The first failure only: the same cause (a full disk) fails every table alike.
	for _, t := range tables.Query {
		if cerr := files[t].close(); err == nil {
			err = cerr
		}
	}
	short := recording.Shortfall(p.Name, res.Truncated, res.Complete)
	if damaged != "" {
		short = damaged
	}
	if short != "" && err == nil {
		st.Shortfalls = append(st.Shortfalls, short)
	}
	if lost := recording.LossWarning(p.Name, res.Stats); lost != "" && err == nil {
		st.Shortfalls = append(st.Shortfalls, lost)
	}
	if res.RangePaths != "" && err == nil {
		st.Shortfalls = append(st.Shortfalls, res.RangePaths)
	}
	return err
}

// exportUnreadable writes the row gpurr query has of a process whose events file cannot be read
// at all: its processes row, in a file of the partition its directory name gives. Its other
// tables have no file: the process has no rows there, and the other processes' files say
// what their columns are.
func exportUnreadable(dir, name string, st *Stats) error {
	var f tableFile
	err := tables.Unreadable(name, tables.Options{Tables: tables.Query, Row: func(t *tables.Table, values []tables.Value) error {
		f = newTableFile(t, filepath.Join(dir, t.Name, processFile(tables.NameInfo(name), name)), st)
		f.add(values)
		return nil
	}})
	if err == nil && f != nil {
		if err = f.take()(); err == nil {
			err = f.close()
		}
	}
	if err != nil && f != nil {
		f.abort()
	}
	return err
}

// writer runs the writes of batches of rows, in order, on a goroutine of
// its own; after one fails it runs no more.
type writer struct {
	writes chan func() error
	failed chan struct{} // closed when a write failed
	done   chan struct{}
	err    error
}

// queued is how many batches may wait for the writer.
const queued = 4

func startWriter() *writer {
	w := &writer{writes: make(chan func() error, queued), failed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for write := range w.writes {
			if w.err != nil {
				continue
			}
			if w.err = write(); w.err != nil {
				close(w.failed)
			}
		}
	}()
	return w
}

var errWriteFailed = errors.New("a write failed")

// send queues a write; after a write failed it queues none (wait says
// which failed).
func (w *writer) send(write func() error) error {
	select {
	case <-w.failed:
		return errWriteFailed
	default:
	}
	select {
	case w.writes <- write:
		return nil
	case <-w.failed:
		return errWriteFailed
	}
}

// wait runs the writes sent and returns the first error.
func (w *writer) wait() error {
	close(w.writes)
	<-w.done
	return w.err
}

// tableFile is one table's file for one process, created with its first
// rows.
type tableFile interface {
	// add buffers a row. When the buffer is full it returns the write of
	// the buffered rows, for the writer.
	add(values []tables.Value) (write func() error)
	// take returns the write of the rows buffered, nil when none are.
	take() (write func() error)
	// close ends the file, once every write ran; a file without rows is
	// created then, holding its schema alone.
	close() error
	// abort closes the file after an error.
	abort()
	// schema is the file's Parquet schema.
	schema() *parquet.Schema
}

// A row type made from a table's description (rows_gen.go): set fills
// its fields from a row's values.
type row[T any] interface {
	*T
	set(values []tables.Value)
}

// file writes rows of type T.
type file[T any, P row[T]] struct {
	path  string
	table *tables.Table
	st    *Stats
	f     *os.File
	w     *parquet.GenericWriter[T]
	rows  []T
	spare chan []T // buffers the writer is done with
}

// rowGroup bounds the rows a writer buffers before it writes them out;
// batch is the rows handed to it at a time.
const (
	rowGroup = 64 << 10
	batch    = 4096
)

func newFile[T any, P row[T]](t *tables.Table, path string, st *Stats) *file[T, P] {
	return &file[T, P]{path: path, table: t, st: st, spare: make(chan []T, 2)}
}

func (f *file[T, P]) add(values []tables.Value) func() error {
	if f.rows == nil {
		select {
		case f.rows = <-f.spare:
		default:
			f.rows = make([]T, 0, batch)
		}
	}
	n := len(f.rows)
	f.rows = f.rows[:n+1]
	P(&f.rows[n]).set(values)
	if n+1 < batch {
		return nil
	}
	return f.take()
}

func (f *file[T, P]) take() func() error {
	rows := f.rows
	if len(rows) == 0 {
		return nil
	}
	f.rows = nil
	return func() error {
		err := f.write(rows)
		select {
		case f.spare <- rows[:0]:
		default:
		}
		return err
	}
}

// open creates the file, once.
func (f *file[T, P]) open() error {
	if f.w != nil {
		return nil
	}
	out, err := createFile(f.path)
	if err != nil {
		return err
	}
	f.f = out
	f.w = parquet.NewGenericWriter[T](out, f.schema(), parquet.Compression(&parquet.Zstd),
		parquet.MaxRowsPerRowGroup(rowGroup), parquet.CreatedBy("gpurr export", "", ""))
	f.st.Files++
	return nil
}

func (f *file[T, P]) write(rows []T) error {
	if err := f.open(); err != nil {
		return err
	}
	if _, err := f.w.Write(rows); err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	f.st.Rows[f.table.Name] += int64(len(rows))
	return nil
}

func (f *file[T, P]) close() error {
	if err := f.open(); err != nil {
		return err
	}
	if err := f.w.Close(); err != nil {
		f.f.Close()
		return fmt.Errorf("%s: %w", f.path, err)
	}
	return f.f.Close()
}

func (f *file[T, P]) abort() {
	if f.f != nil {
		f.f.Close()
	}
}

// schema is T's, named after the table.
func (f *file[T, P]) schema() *parquet.Schema {
	return parquet.NewSchema(f.table.Name, parquet.SchemaOf(new(T)))
}
