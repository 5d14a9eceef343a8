/*
 * nopy.c - pystack in a process without CPython: everything must report
 * "no python" and return 0. Built and run by run.sh.
 */
#include <stdio.h>
#include <string.h>

#include "pystack.h"

int main(void)
{
    gp_pyframe fr[8];
    char file[16], func[16];
    int line = 123;
    int init = gp_py_init();
    int init2 = gp_py_init();
    int n = gp_py_walk(fr, 8);
    int gil = gp_py_thread_holds_gil();
    gp_pyframe bogus = {fr, 0};
    int res = gp_py_resolve(&bogus, file, sizeof file, func, sizeof func, &line);
    const char *d = gp_py_describe();
    int ok = init == 0 && init2 == 0 && n == 0 && gil == 0 && res == 0 && line == -1 &&
             strcmp(d, "no python") == 0 && strcmp(file, "<?>") == 0;
    printf("%s no-python process: init=%d walk=%d gil=%d resolve=%d describe=\"%s\"\n",
           ok ? "PASS" : "FAIL", init, n, gil, res, d);
    return ok ? 0 : 1;
}
