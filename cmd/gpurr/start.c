// How the program starts on glibc older than 2.34, for the wheel's manylinux tag (with
// scripts/glibc-stubs, which the Makefile links against; docs/python.md).
//
// The C start files of glibc 2.34 and later (crt1.o, Scrt1.o, which gcc links in) call
// __libc_start_main@GLIBC_2.34, which older glibc lack, and pass it no initializer, since that
// version runs the program's constructors itself. Defined here, __libc_start_main takes that
// call and makes it to the architecture's first version, which every glibc has, with the
// initializer that the start files of glibc 2.33 and before passed (__libc_csu_init): the
// program's _init, then its .init_array (the dynamic loader runs .preinit_array). Newer glibc
// run the initializer they are given in the first version, so the constructors run once on
// either.
#include <features.h>

#if defined(__GLIBC__) && (defined(__x86_64__) || defined(__aarch64__))

#if defined(__x86_64__)
#define FIRST_VERSION "GLIBC_2.2.5"
#else
#define FIRST_VERSION "GLIBC_2.17"
#endif

typedef int (*main_fn)(int, char **, char **);
typedef void (*init_fn)(int, char **, char **);

extern init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern init_fn __init_array_end[] __attribute__((visibility("hidden")));
extern void _init(void);

int gpurr_libc_start_main_first(main_fn main, int argc, char **argv, init_fn init, void (*fini)(void),
	void (*rtld_fini)(void), void *stack_end);
__asm__(".symver gpurr_libc_start_main_first,__libc_start_main@" FIRST_VERSION);

static void run_constructors(int argc, char **argv, char **envp) {
	_init();
	for (init_fn *f = __init_array_start; f < __init_array_end; f++)
		(*f)(argc, argv, envp);
}

__attribute__((visibility("hidden"))) int __libc_start_main(main_fn main, int argc, char **argv, init_fn init,
	void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
	(void)init;
	return gpurr_libc_start_main_first(main, argc, argv, run_constructors, fini, rtld_fini, stack_end);
}

#endif
