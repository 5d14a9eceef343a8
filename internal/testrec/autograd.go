package testrec

import (
	"math"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// forwardThread is PyTorch's id of the program's main thread, which runs
// the forward pass (at::RecordFunction::currentThreadId numbers threads
// from 1).
const forwardThread = 1

// engineTID is the Linux thread of autograd's engine, which makes the
// launches of the backward pass.
func engineTID(rank int) uint32 { return pid(rank) + 11 }

// The torch the agent found: one whose autograd layout it knows, and one
// it does not.
func linkedTorch() *pb.AutogradInfo {
	return &pb.AutogradInfo{TorchVersion: "2.11.0+cu130", Linked: true}
}

func unlinkedTorch() *pb.AutogradInfo {
	return &pb.AutogradInfo{TorchVersion: "2.3.0", Reason: "torch 2.3.0: autograd layout not verified for this version"}
}

const (
	libcuda        = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
	libtorchCUDA   = "/home/ada/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"
	libtorchCPU    = "/home/ada/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cpu.so"
	libtorchPython = "/home/ada/.venv/lib/python3.12/site-packages/torch/lib/libtorch_python.so"
	aotRuntime     = "/home/ada/.venv/lib/python3.12/site-packages/torch/_functorch/_aot_autograd/runtime_wrappers.py"
)

// Callstacks of the training step, innermost frame first. The forward
// pass runs Model.forward (csGemm at line 25, an expand at line 26 that
// launches nothing, csTriton at line 27), then the loss at line 43, then
// loss.backward() at line 44, whose launches autograd's engine thread
// makes: a thread that runs no Python, except for the backward of a
// compiled function, which is Python code.
var (
	csLoss = []*pb.Frame{
		native(libcuda, "cuLaunchKernel", 0x2f1a40),
		native(libtorchCUDA, "at::native::sum_kernel_cuda(at::TensorIterator&)", 0x1c2d3e0),
		py(script, 43, "main"),
		py(script, 52, "<module>"),
	}
	csEngine = []*pb.Frame{
		native(libcuda, "cuLaunchKernel", 0x2f1a40),
		native(libtorchCUDA, "at::native::gpu_kernel_impl(at::TensorIteratorBase&)", 0x1b0c4d0),
		native(libtorchCPU, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)", 0x5a6b7c0),
		native(libtorchCPU, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", 0x5a6f100),
	}
	csTritonBackward = []*pb.Frame{
		py("/tmp/torchinductor_ada/gq/cgqbwd.py", 54, "call"),
		py(aotRuntime, 2110, "CompiledFunction.backward"),
		native(libtorchPython, "torch::autograd::PyNode::apply(std::vector<at::Tensor>&&)", 0x9a1b20),
		native(libtorchCPU, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", 0x5a6f100),
	}
)

// trainStep is one step of training: the forward pass on the main thread,
// each op creating its autograd node before it launches, then the
// backward pass, node by node in reverse. The backward of the Linear
// layer writes NaN into the weight's gradient; with diverge, its gemm for
// the input's gradient computes another result than without (cuBLAS's
// split-K gemms add partial sums in any order).
func (p *program) trainStep(diverge bool) *pb.Batch {
	gemm, triton, loss := callstack(csGemm), callstack(csTriton), callstack(csLoss)
	engine, tritonBackward := callstack(csEngine), callstack(csTritonBackward)
	b := &pb.Batch{Callstacks: []*pb.Callstack{loss, engine, tritonBackward}}
	p.stats.Callstacks += uint64(len(b.Callstacks))
	add := func(l *pb.Launch, a *pb.KernelActivity) {
		b.Launches, b.Activities = append(b.Launches, l), append(b.Activities, a)
		// The agent's own time: 0.6 µs in each launch's callbacks, and one module
		// load of 2 ms (the agent copies its image) in other callbacks.
		p.stats.AgentLaunchNs += 600
		p.stats.AgentCallbackNs = p.stats.AgentLaunchNs + 2_000_000
		// Of it: 400 ns taking the callstack, 50 reading autograd, 100 writing
		// the record; the first launch of each of 3 new stacks took 20 µs more.
		p.stats.AgentStackNs += 400
		p.stats.AgentAutogradNs += 50
		p.stats.AgentRingNs += 100
		p.stats.StacksNew, p.stats.AgentStackNewNs = 3, 60_000
	}

	addmm := p.node()
	add(p.eager(kGemm, gemm, 5))
	expand := p.node() // a view: it launches nothing
	compiled := p.node()
	add(p.eager(kTriton, triton, 5))
	sum := p.node()
	add(p.eager(kAdd, loss, 5))

	add(p.backward(kFill, engine, "SumBackward0", sum, loss, pb.Autograd_NEXT_LAUNCH))
	add(p.backward(kTriton, tritonBackward, "CompiledFunctionBackward", compiled, triton, pb.Autograd_NEXT_LAUNCH))
	// The expand launched nothing: its forward launch is the next op's.
	add(p.backward(kAdd, engine, "ExpandBackward0", expand, triton, pb.Autograd_LATER_LAUNCH))
	p.nextWrites(false, diverge)
	add(p.backward(kGemm, engine, "AddmmBackward0", addmm, gemm, pb.Autograd_NEXT_LAUNCH)) // the input's gradient
	p.nextWrites(true, false)
	add(p.backward(kGemm, engine, "AddmmBackward0", addmm, gemm, pb.Autograd_NEXT_LAUNCH)) // the weight's
	// AccumulateGrad nodes belong to no forward op: PyTorch gives them the
	// largest sequence number and no thread, and nothing links them.
	add(p.backward(kAdd, engine, "AccumulateGrad", math.MaxUint64, nil, pb.Autograd_LINK_UNSPECIFIED))
	return b
}

// node creates an autograd node on the forward thread: it takes the
// thread's next sequence number.
func (p *program) node() uint64 {
	p.nextNode++
	return p.nextNode - 1
}

// backward is a launch of kernel k made by autograd's engine thread inside
// node's backward. With the agent linked, it carries the node, its
// sequence number and the callstack of its forward launch (nil: none was
// found); unlinked, it carries nothing of that.
func (p *program) backward(k int, cs *pb.Callstack, node string, seqNr uint64, forward *pb.Callstack, link pb.Autograd_Link) (*pb.Launch, *pb.KernelActivity) {
	l, a := p.eager(k, cs, 6)
	l.Tid = engineTID(p.rank)
	if !p.linked {
		return l, a
	}
	ag := &pb.Autograd{Thread: forwardThread, SequenceNr: seqNr, BackwardNode: node, Link: link}
	if seqNr == math.MaxUint64 {
		ag.Thread = 0
	}
	p.stats.BackwardLaunches++
	if forward != nil {
		ag.ForwardCallstackId = forward.Id
		p.stats.BackwardLinked++
	}
	l.Autograd = ag
	return l, a
}

// nextWrites says what the next kernel to run writes besides its usual
// result: NaN, or (skew) another result than in the run without skew.
func (p *program) nextWrites(nan, skew bool) {
	if p.mem != nil {
		p.mem.writeNaN, p.mem.skew = nan, skew
	}
}
