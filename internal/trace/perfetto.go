package trace

import (
	"bufio"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of Perfetto's trace format (protos/perfetto/trace/ in the
// Perfetto project; the pinned copy the tests decode with is
// internal/perfettopb/perfetto_trace.proto).
const (
	fTracePacket = 1 // Trace.packet

	fPacketTimestamp      = 8
	fPacketSequenceID     = 10 // trusted_packet_sequence_id
	fPacketTrackEvent     = 11
	fPacketInternedData   = 12
	fPacketSequenceFlags  = 13
	fPacketTrackDesc      = 60
	fPacketFirstOnSeq     = 87
	seqIncrementalCleared = 1 // SEQ_INCREMENTAL_STATE_CLEARED
	seqNeedsIncremental   = 2 // SEQ_NEEDS_INCREMENTAL_STATE

	fInternedCategories = 1 // event_categories
	fInternedNames      = 2 // event_names
	fInternedAnnoNames  = 3 // debug_annotation_names
	fInternedIID        = 1 // EventName.iid, EventCategory.iid, DebugAnnotationName.iid
	fInternedName       = 2

	fTrackUUID    = 1 // TrackDescriptor
	fTrackName    = 2
	fTrackProcess = 3
	fTrackThread  = 4
	fTrackParent  = 5

	fProcessPid     = 1 // ProcessDescriptor
	fProcessCmdline = 2
	fProcessName    = 6
	fThreadPid      = 1 // ThreadDescriptor
	fThreadTid      = 2
	fThreadName     = 5

	fEventCategoryIIDs = 3 // TrackEvent
	fEventAnnotations  = 4
	fEventType         = 9
	fEventNameIID      = 10
	fEventTrackUUID    = 11
	fEventFlowIDs      = 47
	fEventTermFlowIDs  = 48
	typeSliceBegin     = 1
	typeSliceEnd       = 2
	typeInstant        = 3

	fAnnoNameIID = 1 // DebugAnnotation
	fAnnoInt     = 4
	fAnnoString  = 6
)

// perfettoSink writes a Perfetto trace: a Trace message, written packet
// by packet. All packets are one sequence (id 1), whose interning tables
// hold event names, categories and argument names, each sent once, with
// the packet that first uses it. Slices are a BEGIN and an END event;
// launch calls, whose duration is not recorded, are instants. Flows:
// an eager kernel ends the flow its launch call started; a graph replay's
// kernels continue it, one after the other, from the cuGraphLaunch.
type perfettoSink struct {
	w        *bufio.Writer
	pkt, sub []byte // the packet being built; a nested message
	anno     []byte // a debug annotation being built
	names    interner
	cats     interner
	annos    interner
	interned []byte // InternedData entries of the packet being built
}

// sequenceID is the one packet sequence the writer uses.
const sequenceID = 1

type interner struct{ ids map[string]uint64 }

// id returns s's interning id and whether it is new (must be sent).
func (in *interner) id(s string) (uint64, bool) {
	if id, ok := in.ids[s]; ok {
		return id, false
	}
	if in.ids == nil {
		in.ids = map[string]uint64{}
	}
	id := uint64(len(in.ids) + 1)
	in.ids[s] = id
	return id, true
}

func newPerfettoSink(w io.Writer) *perfettoSink {
	return &perfettoSink{w: bufio.NewWriterSize(w, 1<<20)}
}

// packet writes s.pkt as one Trace.packet.
func (s *perfettoSink) packet() error {
	var hdr [16]byte
	h := protowire.AppendTag(hdr[:0], fTracePacket, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(s.pkt)))
	s.w.Write(h)
	_, err := s.w.Write(s.pkt)
	return err
}

// begin starts a packet on the sequence; the first one clears the
// sequence's incremental state, later ones depend on it.
func (s *perfettoSink) begin(ts int64) {
	p := protowire.AppendTag(s.pkt[:0], fPacketSequenceID, protowire.VarintType)
	p = protowire.AppendVarint(p, sequenceID)
	if s.names.ids == nil && s.cats.ids == nil && s.annos.ids == nil {
		p = appendVarintField(p, fPacketSequenceFlags, seqIncrementalCleared|seqNeedsIncremental)
		p = appendVarintField(p, fPacketFirstOnSeq, 1)
	} else {
		p = appendVarintField(p, fPacketSequenceFlags, seqNeedsIncremental)
	}
	if ts >= 0 {
		p = appendVarintField(p, fPacketTimestamp, uint64(ts))
	}
	s.pkt = p
}

func (s *perfettoSink) track(t *track) error {
	p := t.proc
	if !p.declared {
		p.declared = true
		d := appendVarintField(s.sub[:0], fProcessPid, uint64(p.pid))
		for _, a := range p.argv {
			d = protowire.AppendTag(d, fProcessCmdline, protowire.BytesType)
			d = protowire.AppendString(d, a)
		}
		d = appendStringField(d, fProcessName, p.name)
		td := appendVarintField(nil, fTrackUUID, p.uuid)
		td = appendBytesField(td, fTrackProcess, d)
		s.begin(-1)
		s.pkt = appendBytesField(s.pkt, fPacketTrackDesc, td)
		if err := s.packet(); err != nil {
			return err
		}
	}
	td := appendVarintField(s.sub[:0], fTrackUUID, t.uuid)
	if t.thread {
		d := appendVarintField(nil, fThreadPid, uint64(p.pid))
		d = appendVarintField(d, fThreadTid, uint64(t.tid))
		d = appendStringField(d, fThreadName, t.name)
		td = appendBytesField(td, fTrackThread, d)
	} else {
		td = appendVarintField(td, fTrackParent, p.uuid)
		td = appendStringField(td, fTrackName, t.name)
	}
	s.sub = td
	s.begin(-1)
	s.pkt = appendBytesField(s.pkt, fPacketTrackDesc, td)
	return s.packet()
}

// intern adds an entry to the packet's InternedData when new.
func (s *perfettoSink) intern(in *interner, field protowire.Number, v string) uint64 {
	id, fresh := in.id(v)
	if fresh {
		e := appendVarintField(nil, fInternedIID, id)
		e = appendStringField(e, fInternedName, v)
		s.interned = appendBytesField(s.interned, field, e)
	}
	return id
}

func (s *perfettoSink) slice(sl *slice) error {
	ev := appendVarintField(s.sub[:0], fEventTrackUUID, sl.track.uuid)
	typ := uint64(typeSliceBegin)
	if sl.instant {
		typ = typeInstant
	}
	ev = appendVarintField(ev, fEventType, typ)
	ev = appendVarintField(ev, fEventNameIID, s.intern(&s.names, fInternedNames, sl.name))
	ev = appendVarintField(ev, fEventCategoryIIDs, s.intern(&s.cats, fInternedCategories, sl.cat))
	for _, a := range sl.args {
		d := appendVarintField(s.anno[:0], fAnnoNameIID, s.intern(&s.annos, fInternedAnnoNames, a.key))
		if a.num {
			d = appendVarintField(d, fAnnoInt, uint64(a.n))
		} else {
			d = appendStringField(d, fAnnoString, a.s)
		}
		s.anno = d
		ev = appendBytesField(ev, fEventAnnotations, d)
	}
	switch {
	case sl.flowOut != 0:
		ev = appendFixedField(ev, fEventFlowIDs, sl.flowOut)
	case sl.flowIn != 0 && sl.chain:
		ev = appendFixedField(ev, fEventFlowIDs, sl.flowIn)
	case sl.flowIn != 0:
		ev = appendFixedField(ev, fEventTermFlowIDs, sl.flowIn)
	}
	s.sub = ev
	s.begin(sl.ts)
	s.pkt = appendBytesField(s.pkt, fPacketTrackEvent, ev)
	if len(s.interned) > 0 {
		s.pkt = appendBytesField(s.pkt, fPacketInternedData, s.interned)
		s.interned = s.interned[:0]
	}
	if err := s.packet(); err != nil || sl.instant {
		return err
	}
	end := appendVarintField(s.sub[:0], fEventTrackUUID, sl.track.uuid)
	end = appendVarintField(end, fEventType, typeSliceEnd)
	s.sub = end
	s.begin(sl.ts + sl.dur)
	s.pkt = appendBytesField(s.pkt, fPacketTrackEvent, end)
	return s.packet()
}

func (s *perfettoSink) finish() error { return s.w.Flush() }

func appendVarintField(b []byte, n protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendStringField(b []byte, n protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendBytesField(b []byte, n protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendFixedField(b []byte, n protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, n, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}
