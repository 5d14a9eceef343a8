package ptx

import (
	"fmt"
	"strings"
	"testing"
)

// benchKernel is a Triton-style elementwise kernel body, as LLVM writes
// it: .loc lines, vector loads and stores in inline asm, float math.
const benchKernel = `.visible .entry kern%d(
	.param .u64 .ptr .global .align 1 kern%[1]d_param_0,
	.param .u64 .ptr .global .align 1 kern%[1]d_param_1,
	.param .u64 .ptr .global .align 1 kern%[1]d_param_2,
	.param .u32 kern%[1]d_param_3
)
.reqntid 128, 1, 1
{
	.reg .pred 	%%p<3>;
	.reg .b32 	%%r<30>;
	.reg .f32 	%%f<25>;
	.reg .b64 	%%rd<10>;
	.loc	1 7 0                           // bench.py:7:0
$L__func_begin%[1]d:
	ld.param.u64 	%%rd4, [kern%[1]d_param_0];
	ld.param.u64 	%%rd5, [kern%[1]d_param_1];
	.loc	1 9 24                          // bench.py:9:24
	// begin inline asm
	mov.u32 %%r1, %%ctaid.x;
	// end inline asm
	shl.b32 	%%r14, %%r1, 9;
	ld.param.u64 	%%rd6, [kern%[1]d_param_2];
	mov.u32 	%%r15, %%tid.x;
	shl.b32 	%%r16, %%r15, 2;
	and.b32  	%%r17, %%r16, 508;
	or.b32  	%%r18, %%r14, %%r17;
	ld.param.u32 	%%r19, [kern%[1]d_param_3];
	setp.lt.s32 	%%p1, %%r18, %%r19;
	mul.wide.s32 	%%rd7, %%r18, 4;
	add.s64 	%%rd1, %%rd4, %%rd7;
	.loc	1 12 16                         // bench.py:12:16
	// begin inline asm
	mov.u32 %%r2, 0x0;
	mov.u32 %%r3, 0x0;
	mov.u32 %%r4, 0x0;
	mov.u32 %%r5, 0x0;
	@%%p1 ld.global.v4.b32 { %%r2, %%r3, %%r4, %%r5 }, [ %%rd1 + 0 ];
	// end inline asm
	add.s64 	%%rd2, %%rd5, %%rd7;
	// begin inline asm
	mov.u32 %%r6, 0x0;
	mov.u32 %%r7, 0x0;
	mov.u32 %%r8, 0x0;
	mov.u32 %%r9, 0x0;
	@%%p1 ld.global.v4.b32 { %%r6, %%r7, %%r8, %%r9 }, [ %%rd2 + 0 ];
	// end inline asm
	mov.b32 	%%f1, %%r2;
	mov.b32 	%%f2, %%r6;
	.loc	1 14 17                         // bench.py:14:17
	fma.rn.f32 	%%f9, %%f1, 0f3F000000, %%f2;
	mov.b32 	%%f3, %%r3;
	mov.b32 	%%f4, %%r7;
	fma.rn.f32 	%%f10, %%f3, 0f3F000000, %%f4;
	mov.b32 	%%f5, %%r4;
	mov.b32 	%%f6, %%r8;
	fma.rn.f32 	%%f11, %%f5, 0f3F000000, %%f6;
	mov.b32 	%%f7, %%r5;
	mov.b32 	%%f8, %%r9;
	fma.rn.f32 	%%f12, %%f7, 0f3F000000, %%f8;
	add.s64 	%%rd3, %%rd6, %%rd7;
	mov.b32 	%%r10, %%f9;
	mov.b32 	%%r11, %%f10;
	mov.b32 	%%r12, %%f11;
	mov.b32 	%%r13, %%f12;
	.loc	1 15 30                         // bench.py:15:30
	// begin inline asm
	@%%p1 st.global.v4.b32 [ %%rd3 + 0 ], { %%r10, %%r11, %%r12, %%r13 };
	// end inline asm
	ret;
$L__func_end%[1]d:
}
`

// benchModule is about 8 MiB of PTX: many copies of benchKernel, as a
// large compiled model's modules hold.
func benchModule(b *testing.B) []byte {
	b.Helper()
	var s strings.Builder
	s.WriteString(".version 8.4\n.target sm_90a\n.address_size 64\n\n")
	for i := 0; s.Len() < 8<<20; i++ {
		fmt.Fprintf(&s, benchKernel, i)
	}
	s.WriteString("\t.file\t1 \"/tmp/bench.py\"\n")
	src := []byte(s.String())
	if _, err := Parse(src); err != nil {
		b.Fatal(err)
	}
	return src
}

// BenchmarkParse measures parsing, the cost paid for every module a
// recording loads.
func BenchmarkParse(b *testing.B) {
	src := benchModule(b)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteSets measures the analysis of every kernel of the module,
// parsing included.
func BenchmarkWriteSets(b *testing.B) {
	src := benchModule(b)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := Parse(src)
		if err != nil {
			b.Fatal(err)
		}
		if len(m.WriteSets()) == 0 {
			b.Fatal("no kernels")
		}
	}
}

// BenchmarkPrint measures printing the module back to PTX.
func BenchmarkPrint(b *testing.B) {
	m, err := Parse(benchModule(b))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(m.String())))
	b.ReportAllocs()
	for b.Loop() {
		_ = m.String()
	}
}
