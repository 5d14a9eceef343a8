// autograd.h - where a launch sits in PyTorch's autograd graph, read from
// libtorch's own state on the launching thread, without the program's help.
//
// PyTorch numbers the autograd nodes each thread creates (sequence numbers,
// at::sequence_number). An op that needs a gradient creates its node before it
// launches its kernels, so a forward launch made with the thread's next number
// at N belongs to node N-1 in the usual case. While the autograd engine runs a
// node's backward, torch::autograd::get_current_node() returns that node, which
// holds its own number and the id of the thread that ran its forward op. The
// writer joins the two (recorder.go), as torch.profiler does.
#ifndef GPURR_AUTOGRAD_H
#define GPURR_AUTOGRAD_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"

// Launch record fields (gp_launch_rec.ag_*).
typedef struct {
  uint64_t thread;       // PyTorch's forward thread id
  uint64_t sequence_nr;  // forward: the thread's next number; backward: the node's
  uint32_t node_class;   // 0 in forward; else the node's class (a gp_nodeclass_rec id)
  uint32_t present;      // 1 when the fields above were read
} gp_autograd;

// gp_nodeclass_rec names a class of autograd node once.
typedef struct {
  gp_rec_hdr h;
  uint32_t id;
  uint32_t kind;  // GP_NODECLASS_*
  uint32_t name_len, pad;
  // name_len bytes of name follow
} gp_nodeclass_rec;

enum {
  GP_NODECLASS_CXX = 1,     // name is a C++ type's mangled name (std::type_info::name)
  GP_NODECLASS_PYTHON = 2,  // name is a Python class's name (a torch.autograd.Function's backward)
};

// gp_autograd_init looks for libtorch in the process and checks that its
// layout is one this build knows. Call once at start, before launches.
void gp_autograd_init(void);

// What gp_autograd_init found, for Process.autograd: torch's version ("" when
// unknown), whether launches carry context, and why not. present is 0 when
// the process has no libtorch at all.
typedef struct {
  int present, linked;
  const char *version, *reason;
} gp_autograd_info;
void gp_autograd_describe(gp_autograd_info *out);

// gp_autograd_take fills *out for a launch made now on the calling thread
// (present 0 when not linked). Costs two or three calls into libtorch.
void gp_autograd_take(gp_autograd *out);

// gp_autograd_stop turns the reads off (process exit: libtorch's thread-local
// state may be torn down already).
void gp_autograd_stop(void);

#endif
