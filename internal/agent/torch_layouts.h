// Offsets inside libtorch's autograd nodes (struct torch::autograd::Node and
// PyNode in torch/csrc/autograd/function.h and python_function.h), per torch
// minor version. layoutcheck/torch_layout.cpp, compiled against a torch
// install's headers on the GPU machine (scripts/gpu-check), checks the entry
// of that version; autograd.c reads only versions listed here.
#ifndef GPURR_TORCH_LAYOUTS_H
#define GPURR_TORCH_LAYOUTS_H

#include <stddef.h>

typedef struct {
  int major, minor;
  size_t sequence_nr;  // Node::sequence_nr_
  size_t thread_id;    // Node::thread_id_
  size_t pynode_obj;   // PyNode::obj, the Python ctx object of a custom Function
} gp_torch_layout;

static const gp_torch_layout gp_torch_layouts[] = {
    {2, 11, 24, 48, 472},
};

#endif
