package query

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// DB is a recording loaded into an in-memory SQLite database.
type DB struct {
	db *sql.DB
	// Warnings says, one line each, what the recording lacks (processes
	// cut short or not closed). The tables hold everything that was written.
	Warnings []string

	chunks []stateChunks // memory_chunks rows not inserted yet (see fillChunks)
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
	for _, t := range tables {
		if _, err := db.db.ExecContext(ctx, t.createSQL()); err != nil {
			return fmt.Errorf("create table %s: %w", t.Name, err)
		}
	}
	// One process at a time: only its records are held in memory.
	err := db.insert(ctx, func(ins *inserter) error {
		for _, p := range set.Processes {
			d, err := p.Load()
			if err != nil {
				return err
			}
			if d.Truncated {
				db.Warnings = append(db.Warnings, fmt.Sprintf("%s: recording truncated (the program was killed mid-write); its tables hold what was written before", p.Name))
			} else if !d.Complete() {
				db.Warnings = append(db.Warnings, fmt.Sprintf("%s: recording incomplete (no end record: the program was killed or is still running)", p.Name))
			}
			insertProcess(ins, p.Name, d)
			db.keepChunks(p.Name, d)
			if ins.err != nil {
				return fmt.Errorf("load %s: %w", p.Name, ins.err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range tables {
		if q := t.indexSQL(); q != "" {
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
	ins, err := newInserter(ctx, tx)
	if err != nil {
		return err
	}
	defer ins.close()
	if err := fill(ins); err != nil {
		return err
	}
	ins.close()
	return tx.Commit()
}

// inserter holds a prepared INSERT per table and the first error, so the
// loader reads as a list of rows.
type inserter struct {
	ctx   context.Context
	stmts map[string]*sql.Stmt
	width map[string]int
	err   error
}

func newInserter(ctx context.Context, tx *sql.Tx) (*inserter, error) {
	in := &inserter{ctx: ctx, stmts: map[string]*sql.Stmt{}, width: map[string]int{}}
	for _, t := range tables {
		st, err := tx.PrepareContext(ctx, t.insertSQL())
		if err != nil {
			in.close()
			return nil, fmt.Errorf("prepare %s: %w", t.Name, err)
		}
		in.stmts[t.Name] = st
		in.width[t.Name] = len(t.Columns)
	}
	return in, nil
}

func (in *inserter) row(table string, values ...any) {
	if in.err != nil {
		return
	}
	if len(values) != in.width[table] {
		in.err = fmt.Errorf("table %s: %d values for %d columns", table, len(values), in.width[table])
		return
	}
	if _, err := in.stmts[table].ExecContext(in.ctx, values...); err != nil {
		in.err = fmt.Errorf("insert into %s: %w", table, err)
	}
}

func (in *inserter) close() {
	for name, st := range in.stmts {
		st.Close()
		delete(in.stmts, name)
	}
}

// u stores an unsigned 64-bit value in SQLite's signed integer, same bits.
func u(v uint64) int64 { return int64(v) }

func b(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// nullText is s, or NULL when s is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullID is id, or NULL when it is 0 (none).
func nullID(id uint64) any {
	if id == 0 {
		return nil
	}
	return u(id)
}

func optional(v *int32) any {
	if v == nil {
		return nil
	}
	return int64(*v)
}

func dim(d *pb.Dim3) []any {
	return []any{int64(d.GetX()), int64(d.GetY()), int64(d.GetZ())}
}

// optionalDim is dim, or NULLs when the launch names none.
func optionalDim(d *pb.Dim3) []any {
	if d == nil {
		return []any{nil, nil, nil}
	}
	return dim(d)
}

// kernelNames is what launches and activities repeat about their kernel.
type kernelNames struct {
	identity, name, demangled string
}

// loader carries one process's indexes while its rows are inserted.
type loader struct {
	ins         *inserter
	process     string
	links       *recording.Links
	kernels     map[uint64]kernelNames
	pythonLines map[uint64][2]any
	nanScan     []string // MemoryConfig.nan_scan: the types of RegionState's NaN counts
}

func insertProcess(ins *inserter, name string, d *recording.Data) {
	ld := &loader{ins: ins, process: name, links: d.Links(), kernels: map[uint64]kernelNames{}, pythonLines: map[uint64][2]any{},
		nanScan: d.Process.GetMemory().GetNanScan()}
	ld.processRow(d)
	for _, dev := range d.Devices {
		ld.row("devices", int64(dev.GetOrdinal()), dev.GetUuid(), dev.GetName(),
			fmt.Sprintf("%d.%d", dev.GetCcMajor(), dev.GetCcMinor()), int64(dev.GetSmCount()), u(dev.GetMemoryBytes()), int64(dev.GetContextUid()))
	}
	for _, m := range d.Modules {
		ld.row("modules", m.GetSha256(), int64(m.GetCuptiModuleId()), u(m.GetSize()), int64(len(m.GetKernelNames())),
			u(m.GetHostNs()), int64(m.GetContextUid()), b(m.GetStored()))
	}
	for _, k := range d.Kernels {
		ld.kernel(k)
	}
	for _, c := range d.Callstacks {
		ld.callstack(c)
	}
	for _, l := range d.Launches {
		ld.launch(l)
	}
	for _, a := range d.Activities {
		ld.activity(a)
	}
	for _, n := range d.GraphNodes {
		ld.row("graph_nodes", u(n.GetNodeId()), int64(n.GetGraphId()), nullID(n.GetOriginalNodeId()), nullID(n.GetLaunchSeq()), int64(n.GetNodeType()))
	}
	for _, g := range d.GraphLaunches {
		ld.row("graph_launches", u(g.GetSeq()), int64(g.GetTid()), u(g.GetGraphExec()), u(g.GetStream()), int64(g.GetStreamId()),
			int64(g.GetCorrelationId()), u(g.GetHostNs()), nullID(g.GetCallstackId()), int64(g.GetDevice()), int64(g.GetResult()),
			ld.lines(g.GetCallstackId())[0], ld.lines(g.GetCallstackId())[1])
	}
	ld.allocations(d.Allocations)
	for _, l := range d.Launches {
		for i, r := range l.GetRegions() {
			ld.row("regions", u(l.GetSeq()), int64(i), u(r.GetAddress()), u(r.GetSize()), nullID(r.GetAllocationId()), offsetsText(r.GetParamOffsets()))
		}
	}
	for _, st := range d.Memory {
		ld.memoryState(st)
	}
	for _, e := range d.Log {
		ld.row("log", u(e.GetHostNs()), e.GetLevel(), e.GetMessage())
	}
	ld.stats(d.Stats)
}

func (ld *loader) row(table string, values ...any) {
	ld.ins.row(table, append([]any{ld.process}, values...)...)
}

func (ld *loader) processRow(d *recording.Data) {
	p := d.Process
	if p == nil {
		p = &pb.Process{}
	}
	memory := make([]any, 8) // NULL when memory capture was off
	if m := p.GetMemory(); m != nil {
		memory = []any{m.GetMode(), int64(m.GetChunkBytes()), m.GetSnapshotKernels(), m.GetSnapshotLaunches(),
			m.GetOnFull(), u(m.GetStagingBytes()), u(m.GetFlightRecorder()), strings.Join(m.GetNanScan(), ",")}
	}
	var endNS, endReason any
	if d.End != nil {
		endNS, endReason = u(d.End.GetEndNs()), d.End.GetReason()
	}
	values := []any{int64(p.GetPid()), int64(p.GetPpid()), p.GetHostname(),
		optional(p.Rank), optional(p.LocalRank), optional(p.WorldSize), strings.Join(p.GetArgv(), " "),
		u(p.GetStartNs()), p.GetStartUnixNs(), endNS, endReason, p.GetPython(), p.GetAgentVersion(),
		p.GetCuptiPath(), int64(p.GetDriverVersion()), p.GetCallstackMode(), b(p.GetGpuTiming()), p.GetKernelFilter(),
		b(d.Complete()), b(d.Truncated), int64(d.Frames)}
	autograd := make([]any, 3) // NULL when no torch was loaded
	if ag := p.GetAutograd(); ag != nil {
		autograd = []any{ag.GetTorchVersion(), b(ag.GetLinked()), ag.GetReason()}
	}
	values = append(values, memory...)
	ld.row("processes", append(values, autograd...)...)
}

// nullIf is v, or NULL when null.
func nullIf(null bool, v any) any {
	if null {
		return nil
	}
	return v
}

func (ld *loader) kernel(k *pb.Kernel) {
	names := kernelNames{identity: fmt.Sprintf("%016x", k.GetIdentity()), name: k.GetName(), demangled: ld.links.KernelName(k)}
	ld.kernels[k.GetId()] = names
	ld.row("kernels", u(k.GetId()), names.identity, names.name, names.demangled, k.GetModuleSha256(),
		int64(len(k.GetParams())), int64(k.GetParamBytes()))
	for i, p := range k.GetParams() {
		ld.row("kernel_params", u(k.GetId()), int64(i), int64(p.GetOffset()), int64(p.GetSize()))
	}
}

func (ld *loader) callstack(c *pb.Callstack) {
	var text strings.Builder
	for i, f := range c.GetFrames() {
		if i > 0 {
			text.WriteByte('\n')
		}
		text.WriteString(recording.FrameText(f))
		var line, pc, offset any
		kind := "native"
		if f.GetKind() == pb.Frame_PYTHON {
			kind, line = "python", int64(f.GetLine())
		} else {
			pc, offset = u(f.GetPc()), u(f.GetOffset())
		}
		ld.row("frames", u(c.GetId()), int64(i), kind, f.GetFile(), line, f.GetFunction(), pc, offset)
	}
	lines := ld.lines(c.GetId())
	ld.row("callstacks", u(c.GetId()), c.GetSource(), int64(len(c.GetFrames())), lines[0], lines[1], text.String(),
		nullText(c.GetCut()))
}

// lines are a callstack's python_line and user_line, each NULL when there
// is none; computed once per callstack however many launches share it.
func (ld *loader) lines(id uint64) [2]any {
	if v, ok := ld.pythonLines[id]; ok {
		return v
	}
	v := [2]any{nullText(ld.links.PythonLine(id)), nullText(ld.links.UserLine(id))}
	ld.pythonLines[id] = v
	return v
}

func (ld *loader) launch(l *pb.Launch) {
	k := ld.kernels[l.GetKernelId()]
	var graphNode any
	if l.GetCaptured() {
		graphNode = u(l.GetGraphNodeId())
	}
	values := []any{u(l.GetSeq()), int64(l.GetTid()), int64(l.GetDevice()), int64(l.GetContextUid()), u(l.GetStream()), int64(l.GetStreamId()),
		u(l.GetKernelId()), nullText(k.identity), nullText(k.name), nullText(k.demangled)}
	values = append(values, dim(l.GetGrid())...)
	values = append(values, dim(l.GetBlock())...)
	values = append(values, optionalDim(l.GetCluster())...)
	values = append(values, int64(l.GetSharedMemBytes()), l.GetParams(), int64(l.GetCorrelationId()), u(l.GetHostNs()),
		nullID(l.GetCallstackId()), b(l.GetCaptured()), graphNode, int64(l.GetApi()), int64(l.GetResult()))
	lines := ld.lines(ld.links.LineCallstack(l))
	values = append(values, lines[0], lines[1])
	values = append(values, autogradValues(l.GetAutograd())...)
	plan := l.GetMemory()
	values = append(values, nullIf(plan == nil, recording.EnumText(plan.GetStatus())), nullIf(plan == nil, b(plan.GetSnapshotSelected())),
		nullIf(plan == nil && len(l.GetRegions()) == 0, int64(len(l.GetRegions()))))
	ld.row("launches", values...)
}

// autogradValues are a launch's in_backward, backward_node, autograd_thread,
// autograd_seq, forward_callstack_id and forward_link: all NULL without
// autograd context.
func autogradValues(ag *pb.Autograd) []any {
	if ag == nil {
		return make([]any, 6)
	}
	node := ag.GetBackwardNode()
	return []any{b(node != ""), nullText(node), u(ag.GetThread()), u(ag.GetSequenceNr()),
		nullID(ag.GetForwardCallstackId()), nullText(recording.EnumText(ag.GetLink()))}
}

// allocations writes a row per allocation, joining its free.
func (ld *loader) allocations(records []*pb.Allocation) {
	seen := make(map[uint64]bool, len(records))
	for _, r := range records {
		id := r.GetId()
		if seen[id] {
			continue
		}
		seen[id] = true
		alloc, free := ld.links.Allocation(id), ld.links.Freed(id)
		a := cmp.Or(alloc, free)
		var allocNS, freeNS any
		if alloc != nil {
			allocNS = u(alloc.GetHostNs())
		}
		if free != nil {
			freeNS = u(free.GetHostNs())
		}
		ld.row("allocations", u(id), recording.EnumText(a.GetKind()), int64(a.GetDevice()), u(a.GetAddress()), u(a.GetSize()), allocNS, freeNS)
	}
}

// offsetsText writes parameter offsets as "0,8,16".
func offsetsText(offsets []uint32) string {
	parts := make([]string, len(offsets))
	for i, o := range offsets {
		parts[i] = strconv.FormatUint(uint64(o), 10)
	}
	return strings.Join(parts, ",")
}

// memoryState writes a row per region of a memory state. A lost state
// holds no region states: it gets a row per region of its launch (or one
// row, when the launch is unknown) saying so.
func (ld *loader) memoryState(st *pb.MemoryState) {
	seq, point := u(st.GetLaunchSeq()), recording.EnumText(st.GetPoint())
	lost := b(st.GetLost())
	reason := nullIf(!st.GetLost(), st.GetLostReason())
	region := func(i int) []any {
		r := ld.links.StateRegion(st, i)
		if r == nil {
			return []any{int64(i), nil, nil}
		}
		return []any{int64(i), u(r.GetAddress()), u(r.GetSize())}
	}
	if len(st.GetRegions()) == 0 {
		n := len(ld.links.Launch(st.GetLaunchSeq()).GetRegions())
		if n == 0 {
			ld.row("memory_states", seq, point, nil, nil, nil, nil, nil, nil, nil, b(st.GetSnapshot()), lost, reason)
		}
		for i := range n {
			values := append([]any{seq, point}, region(i)...)
			ld.row("memory_states", append(values, nil, nil, nil, nil, b(st.GetSnapshot()), lost, reason)...)
		}
		return
	}
	nanScan := ld.nanScan
	for i, rs := range st.GetRegions() {
		for k := range min(len(nanScan), len(rs.GetNanCount()), len(rs.GetInfCount())) {
			if nan, inf := rs.GetNanCount()[k], rs.GetInfCount()[k]; nan+inf > 0 {
				ld.row("nan_counts", seq, int64(i), nanScan[k], u(nan), u(inf))
			}
		}
		values := append([]any{seq, point}, region(i)...)
		ld.row("memory_states", append(values, nullText(recording.HashText(rs.GetHash())), int64(len(rs.GetChunkHashes())/recording.HashBytes),
			int64(rs.GetChunksTransferred()), int64(rs.GetChunksMissing()), b(st.GetSnapshot()), lost, reason)...)
	}
}

func (ld *loader) activity(a *pb.KernelActivity) {
	launch, viaGraph := ld.links.LaunchFor(a)
	var launchSeq, graphSeq any
	lines := [2]any{nil, nil}
	demangled := ld.links.Demangle(a.GetName())
	if launch != nil {
		launchSeq, lines = u(launch.GetSeq()), ld.lines(ld.links.LineCallstack(launch))
		if k, ok := ld.kernels[launch.GetKernelId()]; ok && k.name == a.GetName() {
			demangled = k.demangled
		}
	}
	if g := ld.links.GraphLaunchFor(a); g != nil {
		graphSeq = u(g.GetSeq())
	}
	// A clock that went backwards would make a huge unsigned duration.
	duration := int64(a.GetEndNs()) - int64(a.GetStartNs())
	values := []any{int64(a.GetCorrelationId()), int64(a.GetDevice()), int64(a.GetContextUid()), int64(a.GetStreamId()),
		u(a.GetStartNs()), u(a.GetEndNs()), duration, a.GetName(), demangled, int64(a.GetGraphId()), u(a.GetGraphNodeId()),
		launchSeq, b(viaGraph), graphSeq, lines[0], lines[1]}
	values = append(values, dim(a.GetGrid())...)
	values = append(values, dim(a.GetBlock())...)
	values = append(values, int64(a.GetRegistersPerThread()), int64(a.GetSharedMemBytes()), int64(a.GetStaticSharedMemBytes()))
	ld.row("gpu_activity", values...)
}

func (ld *loader) stats(s *pb.Stats) {
	fields := statsFields()
	m := s.ProtoReflect()
	values := make([]any, fields.Len())
	for i := range fields.Len() {
		values[i] = statValue(m, fields.Get(i))
	}
	ld.row("stats", values...)
}

// statValue reads a Stats field: an integer counter, or text (why memory
// capture stopped). A field of another kind added later reads as NULL
// rather than failing.
func statValue(m protoreflect.Message, fd protoreflect.FieldDescriptor) any {
	if fd.IsList() || fd.IsMap() {
		return nil
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		return m.Get(fd).String()
	case protoreflect.Uint64Kind, protoreflect.Uint32Kind, protoreflect.Fixed64Kind, protoreflect.Fixed32Kind:
		return u(m.Get(fd).Uint())
	case protoreflect.Int64Kind, protoreflect.Int32Kind, protoreflect.Sint64Kind, protoreflect.Sint32Kind,
		protoreflect.Sfixed64Kind, protoreflect.Sfixed32Kind:
		return m.Get(fd).Int()
	}
	return nil
}
