// The snapshot scenario (included by hotpath.c, whose fakes it uses): a
// region larger than the staging ring is snapshotted in pieces that wait
// for the writer to free staging space (backpressure), never skipped.
#include <pthread.h>
#include <unistd.h>

static _Atomic int snap_writer_stop;
static FILE *snap_writer_out;
static _Atomic uint64_t snap_watch_addr, snap_watch_id;  // the allocation id the writer saw at an address

// snap_launch prints which regions a snapshot job copies whole (REGION_COPY_ALL), then runs
// the fake GPU.
static gp_CUresult snap_launch(gp_CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, gp_CUstream s, void **args, void **extra) {
  const gp_batch_param *p = args[0];
  gp_CUresult r = fake_launchKernel(f, gx, gy, gz, bx, by, bz, smem, s, args, extra);
  fprintf(mem_out, "    copies every chunk:");
  for (uint32_t i = 0; i < p->nregions; i++) fprintf(mem_out, " %s", p->r[i].flags & 1 ? "yes" : "no");
  fprintf(mem_out, "\n");
  return r;
}

// snap_writer drains jobs as the Go writer does, beside the launching thread.
static void *snap_writer(void *arg) {
  (void)arg;
  gp_memjob_view *v = malloc(sizeof *v);
  while (v) {
    if (!gp_mem_poll(v)) {
      if (atomic_load(&snap_writer_stop)) break;
      usleep(100);
      continue;
    }
    fprintf(snap_writer_out, "  job %llu of launch %llu (%s), %u chunks, %u of %u jobs:",
            (unsigned long long)v->job_seq, (unsigned long long)v->launch_seq,
            v->point == GP_POINT_BEFORE ? "before" : v->point == GP_POINT_COPY ? "a copy after it" : "after",
            v->total_chunks, v->region_base, v->njobs);
    for (uint32_t r = 0; r < v->nregions; r++)
      fprintf(snap_writer_out, " [0x%llx %llu B]", (unsigned long long)v->region_addr[r],
              (unsigned long long)v->region_size[r]);
    if (v->piece) fprintf(snap_writer_out, " piece from chunk %u", v->piece_first);
    if (v->nregions && v->region_addr[0] == atomic_load(&snap_watch_addr)) atomic_store(&snap_watch_id, v->alloc_id[0]);
    fprintf(snap_writer_out, "\n");
    gp_mem_release();
  }
  free(v);
  return NULL;
}

HP_API int hp_snapshot_scenario(const char *path) {
  mem_out = fopen(path, "w");
  if (!mem_out || mem_setup() != 0) return -1;
  gp_proc.cfg.defer_hashes = 0;
  gp_mem_defer();
  gp_proc.cfg.memory_mode = GP_MEM_SNAPSHOT;
  gp_proc.cfg.staging_bytes = 4 * GP_CHUNK;  // a staging ring of 4 chunks
  char err[256];
  if (!gp_mem_start(&gp_proc.cfg, err, sizeof err)) {
    fprintf(stderr, "hotpath: gp_mem_start: %s\n", err);
    return -1;
  }
  gp_cu.launchKernel = snap_launch;
  char *writer_text = NULL;
  size_t writer_len = 0;
  snap_writer_out = open_memstream(&writer_text, &writer_len);
  pthread_t w;
  if (!snap_writer_out || pthread_create(&w, NULL, snap_writer, NULL) != 0) return -1;
  uint64_t big = mem_alloc(9 * GP_CHUNK + 4096), small = mem_alloc(GP_CHUNK), other = mem_alloc(3 * GP_CHUNK);
  atomic_store(&snap_watch_addr, other);
  fprintf(mem_out, "-- --memory snapshot --staging-bytes 256KiB (4 chunks: at most 2 per job)\n");
  fprintf(mem_out, "ex_kernel(big, small): big (10 chunks) in 5 pieces before and after, small a job of its own\n");
  void *kp[2] = {&big, &small};
  gp_cuLaunchKernel_params p = {F_EX, 1, 1, 1, 32, 1, 1, 0, (gp_CUstream)0x7000a0, kp, NULL};
  launch(GP_CBID_cuLaunchKernel, &p, 0, NULL);
  fprintf(mem_out, "ex_kernel(small, other): other (3 chunks) in 2 pieces\n");
  kp[0] = &small, kp[1] = &other;
  launch(GP_CBID_cuLaunchKernel, &p, 0, NULL);
  fprintf(mem_out, "ex_kernel(small, other) again: nothing new to copy whole\n");
  launch(GP_CBID_cuLaunchKernel, &p, 0, NULL);
  while (gp_mem_outstanding()) usleep(100);
  fprintf(mem_out, "the writer finds chunks of other that changed between hash and copy (gp_mem_copy_all)\n");
  uint64_t id = atomic_load(&snap_watch_id);
  gp_mem_copy_all(&id, 1);
  fprintf(mem_out, "ex_kernel(small, other): every piece of other copies every chunk, before; after, none\n");
  launch(GP_CBID_cuLaunchKernel, &p, 0, NULL);
  while (gp_mem_outstanding()) usleep(100);
  fprintf(mem_out, "cuMemcpyHtoD(other + 4096): other's copy state, a snapshot in pieces on the legacy stream, compared with its shadow\n");
  uint64_t htod[3] = {other + 4096, 0x1000, 64};
  driver_call(CB_HTOD, "cuMemcpyHtoD_v2", htod);
  while (gp_mem_outstanding()) usleep(100);
  atomic_store(&snap_writer_stop, 1);
  pthread_join(w, NULL);
  fclose(snap_writer_out);
  gp_counters c;
  gp_read_counters(&c);
  fprintf(mem_out, "the writer was handed:\n%scounters: memory launches %llu, skipped %llu\n", writer_text,
          (unsigned long long)c.memory_launches, (unsigned long long)c.memory_skipped);
  free(writer_text);
  fclose(mem_out);
  return 0;
}
