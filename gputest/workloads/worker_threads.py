"""Runs a workload's worker threads to the end: starts one per index, joins each (300 s at most),
and exits 1 with every thread's error on stderr when any failed or hung, so one thread's failure
never hangs the test or hides another's."""
import sys
import threading


def run_workers(name, count, worker, errors):
    """worker(t) appends its failure to errors (and aborts any barrier it shares)."""
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    if any(th.is_alive() for th in threads):
        errors.append("a worker thread did not finish in 300 s")
    if errors:
        print(f"{name}: " + "; ".join(errors), file=sys.stderr)
        sys.exit(1)
