// A stand-in for libtorch_cpu.so with the three entry points gpurr's agent
// calls and torch::autograd::Node laid out as torch 2.11 lays it out
// (internal/agent/torch_layouts.h), so autograd.c's hot path can be tested
// on a machine without torch. Built by autograd_cpu_test.go.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace at {
namespace sequence_number {
static thread_local uint64_t next_nr = 0;
uint64_t peek() { return next_nr; }
}  // namespace sequence_number
struct RecordFunction {
  static uint64_t currentThreadId();
};
static std::atomic<uint64_t> next_thread{0};
static thread_local uint64_t thread_id = 0;
uint64_t RecordFunction::currentThreadId() {
  if (!thread_id) thread_id = ++next_thread;
  return thread_id;
}
}  // namespace at

namespace torch {
namespace autograd {
struct Node : std::enable_shared_from_this<Node> {
  Node(uint64_t seq, uint64_t thread) : sequence_nr_(seq), thread_id_(thread) {}
  virtual ~Node() = default;
  const uint64_t sequence_nr_;
  uint64_t topological_nr_ = 0;
  bool has_parent_ = false;
  uint64_t thread_id_;
};
static thread_local std::shared_ptr<Node> current;
std::shared_ptr<Node> get_current_node() { return current; }
// A Python autograd.Function's node: its ctx object at offset 472, as in 2.11.
struct PyNode : Node {
  using Node::Node;
  char other_members[472 - 56];
  void *obj = nullptr;
};
static_assert(sizeof(Node) == 56 && offsetof(PyNode, obj) == 472, "PyNode::obj must sit where torch 2.11 has it");
namespace generated {
struct MmBackward0 : Node {
  using Node::Node;
};
struct ReluBackward0 : Node {
  using Node::Node;
};
}  // namespace generated
}  // namespace autograd
}  // namespace torch

using namespace torch::autograd;

// Just enough of a Python object and its type: ob_type at 8, tp_name at 24.
struct FakeType {
  long refcnt;
  void *type;
  long size;
  const char *tp_name;
};
struct FakeObject {
  long refcnt;
  FakeType *type;
};
static FakeType compiled_type = {1, nullptr, 0, "CompiledFunctionBackward"};
static FakeType custom_type = {1, nullptr, 0, "MyFunctionBackward"};
static FakeObject compiled_ctx = {1, &compiled_type}, custom_ctx = {1, &custom_type};

// The test's controls, C ABI.
extern "C" {
void fake_set_next_nr(uint64_t n) { at::sequence_number::next_nr = n; }
// kind 1: MmBackward0, 2: ReluBackward0, 3 and 4: PyNodes of two Python
// Functions (CompiledFunctionBackward, MyFunctionBackward), 0: leave backward.
void fake_enter_node(int kind, uint64_t seq, uint64_t thread) {
  if (kind == 1) {
    current = std::make_shared<generated::MmBackward0>(seq, thread);
  } else if (kind == 2) {
    current = std::make_shared<generated::ReluBackward0>(seq, thread);
  } else if (kind == 3 || kind == 4) {
    auto n = std::make_shared<PyNode>(seq, thread);
    n->obj = kind == 3 ? &compiled_ctx : &custom_ctx;
    current = n;
  } else {
    current.reset();
  }
}
long fake_use_count(void) { return current.use_count(); }
uint64_t fake_thread_id(void) { return at::RecordFunction::currentThreadId(); }
}
