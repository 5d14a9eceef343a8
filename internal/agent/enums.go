package agent

/*
#include "memcap.h"
*/
import "C"

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// cEnumValue pairs a C constant that the writer casts straight to a
// recordingpb enum with the name its value has there.
type cEnumValue struct {
	enum protoreflect.EnumDescriptor
	name protoreflect.Name
	c    int64
}

// cEnumValues lists the C constants behind every such cast: MemoryPlan.Status
// from gp_launch_rec.mem_status (recorder.go), Allocation.Kind from
// gp_alloc_rec.kind (recorder.go), MemoryState.Point from a job's point
// (memory.go). enums_test.go holds each equal to its recordingpb value and
// each enum covered whole.
func cEnumValues() []cEnumValue {
	status := pb.MemoryPlan_STATUS_UNSPECIFIED.Descriptor()
	kind := pb.Allocation_KIND_UNSPECIFIED.Descriptor()
	point := pb.MemoryState_POINT_UNSPECIFIED.Descriptor()
	return []cEnumValue{
		{status, "STATUS_UNSPECIFIED", C.GP_PLAN_NONE},
		{status, "HASH", C.GP_PLAN_HASH},
		{status, "SNAPSHOT", C.GP_PLAN_SNAPSHOT},
		{status, "SKIPPED_CAPTURE", C.GP_PLAN_SKIPPED_CAPTURE},
		{status, "SKIPPED_NO_REGIONS", C.GP_PLAN_SKIPPED_NO_REGIONS},
		{status, "SKIPPED_RING_TOO_SMALL", C.GP_PLAN_SKIPPED_RING_TOO_SMALL},
		{status, "SKIPPED_RING_FULL", C.GP_PLAN_SKIPPED_RING_FULL},
		{status, "SKIPPED_ERROR", C.GP_PLAN_SKIPPED_ERROR},
		{status, "SKIPPED_STOPPED", C.GP_PLAN_SKIPPED_STOPPED},
		{status, "OUTSIDE_STEPS", C.GP_PLAN_OUTSIDE_STEPS},
		{kind, "MEM_ALLOC", C.GP_ALLOC_MEM_ALLOC},
		{kind, "MEM_ALLOC_PITCH", C.GP_ALLOC_PITCH},
		{kind, "MEM_ALLOC_ASYNC", C.GP_ALLOC_ASYNC},
		{kind, "MEM_MAP", C.GP_ALLOC_MAP},
		{kind, "MEM_ALLOC_MANAGED", C.GP_ALLOC_MANAGED},
		{kind, "RANGE_QUERY", C.GP_ALLOC_RANGE_QUERY},
		{point, "BEFORE", C.GP_POINT_BEFORE},
		{point, "AFTER", C.GP_POINT_AFTER},
		{point, "DIGEST", C.GP_POINT_DIGEST},
		{point, "COPY", C.GP_POINT_COPY},
	}
}

// ownerNames names gp_alloc_rec.owner's GP_OWNER_* values (Allocation.owner).
var ownerNames = map[C.uint32_t]string{
	C.GP_OWNER_NCCL:    recording.OwnerNCCL,
	C.GP_OWNER_NVSHMEM: recording.OwnerNVSHMEM,
	C.GP_OWNER_UCX:     recording.OwnerUCX,
}
