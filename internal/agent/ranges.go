package agent

/*
#include "agent.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/gpurr/gpurr/internal/agentcfg"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// nvtxState pairs NVTX range records (nvtx.c) into Range and RangeEnd
// messages and names domains and registered strings from their records.
type nvtxState struct {
	domains   map[uint64]string // by domain handle
	strings   map[uint64]string // registered strings by handle
	inBatch   map[uint64]*pb.Range
	started   map[uint64]uint64 // start/end ranges still open: NVTX's id to ours
	unmatched uint64            // ends of start/end ranges no start was seen for
}

func newNvtxState() *nvtxState {
	return &nvtxState{domains: map[uint64]string{}, strings: map[uint64]string{}, inBatch: map[uint64]*pb.Range{},
		started: map[uint64]uint64{}}
}

// nvtxEnabled says whether NVTX calls reach the agent, and why not: NVTX
// loads the injection library NVTX_INJECTION64_PATH names, and gpurr record
// sets it to the agent's library (the one CUDA_INJECTION64_PATH names)
// unless the user set it to another tool's.
func nvtxEnabled() (bool, string) {
	path := os.Getenv(agentcfg.NVTXInjection)
	if path == "" {
		return false, agentcfg.NVTXInjection + " is not set (gpurr record sets it to gpurr's agent)"
	}
	agent := os.Getenv(agentcfg.Injection)
	if agent == "" || !agentcfg.SameLibrary(path, agent) {
		return false, fmt.Sprintf("%s names %s, not gpurr's agent (%s)", agentcfg.NVTXInjection, path, agent)
	}
	return true, ""
}

func (r *recorder) rangeOpen(g *C.gp_range_rec, raw []byte) {
	n := r.nvtx
	rg := &pb.Range{
		Id:       uint64(g.id),
		ParentId: uint64(g.parent_id),
		Tid:      uint32(g.tid),
		Domain:   n.domainName(uint64(g.domain)),
		Category: uint32(g.category),
		StartNs:  uint64(g.start_ns),
		Pushed:   g.pushed != 0,
	}
	switch g.message_kind {
	case C.GP_RANGE_MSG_ASCII:
		rg.Message = string(tail(raw, unsafe.Sizeof(*g), int(g.message_len)))
	case C.GP_RANGE_MSG_REGISTERED:
		rg.Message = n.strings[uint64(g.registered)]
	}
	if !rg.Pushed && g.nvtx_id != 0 {
		n.started[uint64(g.nvtx_id)] = rg.Id
	}
	n.inBatch[rg.Id] = rg
	r.batch.Ranges = append(r.batch.Ranges, rg)
}

func (r *recorder) rangeEnd(e *C.gp_range_end_rec) {
	n := r.nvtx
	id := uint64(e.id)
	if id == 0 {
		var ok bool
		if id, ok = n.started[uint64(e.nvtx_id)]; !ok {
			n.unmatched++
			return
		}
		delete(n.started, uint64(e.nvtx_id))
	}
	if rg := n.inBatch[id]; rg != nil {
		rg.EndNs = uint64(e.end_ns)
		return
	}
	r.batch.RangeEnds = append(r.batch.RangeEnds, &pb.RangeEnd{Id: id, EndNs: uint64(e.end_ns)})
}

func (r *recorder) nvtxName(m *C.gp_nvtx_name_rec, raw []byte) {
	name := string(tail(raw, unsafe.Sizeof(*m), int(m.len)))
	switch m.kind {
	case C.GP_NVTX_NAME_DOMAIN:
		r.nvtx.domains[uint64(m.handle)] = name
	case C.GP_NVTX_NAME_STRING:
		r.nvtx.strings[uint64(m.handle)] = name
	}
}

// domainName is a domain handle's name: "" for the default domain (0), and
// the handle in hex for a domain the agent has no name for (a wide-character
// one).
func (n *nvtxState) domainName(h uint64) string {
	if h == 0 {
		return ""
	}
	if name := n.domains[h]; name != "" {
		return name
	}
	return fmt.Sprintf("domain %#x", h)
}
