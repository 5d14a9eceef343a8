package testrec

import (
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Graph node APIs' callback ids (internal/agent/launchapi.h).
const (
	apiAddKernelNode  = 689 // cuGraphAddKernelNode_v2
	apiExecNodeParams = 692 // cuGraphExecKernelNodeSetParams_v2
)

// builtGraph is the graph the GraphNodes variant builds node by node.
const builtGraph = 5

// The C++ functions that build the graph and change its node (native frames).
var (
	csBuild = []*pb.Frame{
		native("/usr/lib/x86_64-linux-gnu/libcudart.so.13", "cudaGraphAddKernelNode", 0x61f20),
		native("/home/ada/bin/solver", "build_graph(CUgraph_st*, float*, int)", 0x1a40),
		native("/home/ada/bin/solver", "main", 0x1200),
	}
	csUpdate = []*pb.Frame{
		native("/usr/lib/x86_64-linux-gnu/libcudart.so.13", "cudaGraphExecKernelNodeSetParams", 0x62c80),
		native("/home/ada/bin/solver", "retune(CUgraphExec_st*, CUgraphNode_st*, int)", 0x1c10),
		native("/home/ada/bin/solver", "main", 0x1200),
	}
)

// graphNodesBatch builds a graph node by node through the graph API (a gemm
// node and a triton node, each a captured launch of its node, at the C++
// line that added it), instantiates it, and replays it three times; between
// the first and the second replay the gemm node's grid is changed in the
// executable graph: a later launch of the same node, which the last two
// replays' gemm runs ran. The graph also holds a conditional node and a
// memory allocation node, which are no launch, and a module of the program
// launches kernels from the device.
func (p *program) graphNodesBatch(replay *pb.Callstack) *pb.Batch {
	build, update := callstack(csBuild), callstack(csUpdate)
	b := &pb.Batch{Callstacks: []*pb.Callstack{build, update}}
	// One of its modules launches kernels from the device, as the agent logs it.
	b.Log = []*pb.LogEntry{{HostNs: p.now, Level: "warn", Message: recording.DeviceLaunchLogPrefix +
		"module 5be1c2 (2 kernels) launches kernels from the device (dynamic parallelism)"}}
	var nodes []*pb.GraphNode
	for _, k := range []int{kGemm, kTriton} {
		l := p.launch(k, build, 11, true)
		l.Api = apiAddKernelNode
		b.Launches = append(b.Launches, l)
		nodes = append(nodes, &pb.GraphNode{NodeId: l.GraphNodeId, GraphId: builtGraph, LaunchSeq: l.Seq})
	}
	b.GraphNodes = append(b.GraphNodes, nodes...)
	// A conditional node and a memory allocation node: no launch of theirs.
	b.GraphNodes = append(b.GraphNodes,
		&pb.GraphNode{NodeId: 0x5f01, GraphId: builtGraph, NodeType: 13},
		&pb.GraphNode{NodeId: 0x5f02, GraphId: builtGraph, NodeType: 10})
	b.GraphNodes = append(b.GraphNodes,
		&pb.GraphNode{NodeId: 0x6001, GraphId: execGraph, OriginalNodeId: nodes[0].NodeId},
		&pb.GraphNode{NodeId: 0x6002, GraphId: execGraph, OriginalNodeId: nodes[1].NodeId})
	for i := range 3 {
		if i == 1 {
			l := p.launch(kGemm, update, 12, true)
			p.nodes-- // the same node, not a new one
			l.Api, l.GraphNodeId = apiExecNodeParams, nodes[0].NodeId
			l.Grid.X *= 2
			b.Launches = append(b.Launches, l)
			b.GraphNodes = append(b.GraphNodes, &pb.GraphNode{NodeId: nodes[0].NodeId, GraphId: builtGraph, LaunchSeq: l.Seq})
		}
		g, acts := p.replay(replay, []int{kGemm, kTriton}, []uint64{0x6001, 0x6002})
		b.GraphLaunches = append(b.GraphLaunches, g)
		b.Activities = append(b.Activities, acts...)
	}
	return b
}
