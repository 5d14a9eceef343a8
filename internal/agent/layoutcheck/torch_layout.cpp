// torch_layout checks torch_layouts.h's entry for the torch whose headers it
// is compiled against. Built on the GPU machine by scripts/gpu-check:
//   g++ -std=c++17 -I$TORCH/include -I$TORCH/include/torch/csrc/api/include -I$PYTHON_INCLUDE \
//       internal/agent/layoutcheck/torch_layout.cpp -o torch_layout && ./torch_layout
// (TORCH: the torch package directory). Prints one line per mismatch, or a
// summary, and exits 1 on any mismatch or when the version has no entry.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/python_function.h>
#include <torch/version.h>

#include <cstddef>
#include <cstdio>
#include <memory>

#include "../torch_layouts.h"

// Derived types reach the protected members; offsetof on them is what
// libtorch's own code sees.
struct NodeFields : torch::autograd::Node {
  static size_t sequence_nr_offset() { return offsetof(NodeFields, sequence_nr_); }
  static size_t thread_id_offset() { return offsetof(NodeFields, thread_id_); }
};
struct PyNodeFields : torch::autograd::PyNode {
  static size_t obj_offset() { return offsetof(PyNodeFields, obj); }
};

int main() {
  const gp_torch_layout *l = nullptr;
  for (const auto &e : gp_torch_layouts)
    if (e.major == TORCH_VERSION_MAJOR && e.minor == TORCH_VERSION_MINOR) l = &e;
  if (!l) {
    printf("MISSING torch %s: no entry in torch_layouts.h; add {%d, %d, %zu, %zu, %zu}\n", TORCH_VERSION,
           TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, NodeFields::sequence_nr_offset(), NodeFields::thread_id_offset(),
           PyNodeFields::obj_offset());
    return 1;
  }
  int bad = 0;
  auto check = [&](const char *what, size_t ours, size_t real) {
    if (ours != real) {
      bad++;
      printf("MISMATCH torch %s %s: torch_layouts.h %zu, headers %zu\n", TORCH_VERSION, what, ours, real);
    }
  };
  check("Node::sequence_nr_", l->sequence_nr, NodeFields::sequence_nr_offset());
  check("Node::thread_id_", l->thread_id, NodeFields::thread_id_offset());
  check("PyNode::obj", l->pynode_obj, PyNodeFields::obj_offset());
  // autograd.c reads get_current_node()'s std::shared_ptr as {pointer, control block}.
  check("sizeof(std::shared_ptr<Node>)", 2 * sizeof(void *), sizeof(std::shared_ptr<torch::autograd::Node>));
  if (!bad) printf("torch %s: 4 checks, 0 mismatches\n", TORCH_VERSION);
  return bad ? 1 : 0;
}
