/* probe_mpi.h — probe as one rank of an MPI job (`mpirun -np N bin/probe …`, `srun`).
 *
 * Every rank reads the prompts and the config, and computes the same split of the
 * prompts by forward-pass cost (dfl_probe_shard). Each rank runs its share into a
 * part dump beside the output, named ".OUT.partRofN.h5"; rank 0 then copies the other
 * parts' sample groups into its own part (dfl_dump_join) and renames it to the output.
 * The result is the dump one process writes. Parts are removed when the job ends,
 * and a new run to the same output removes parts left by a killed job.
 *
 * Rank 0 alone reports: progress over all ranks (other ranks send theirs at most
 * twice a second), warnings, and the first failing rank's error.
 */
#ifndef DFL_PROBE_MPI_H
#define DFL_PROBE_MPI_H

#include "analysis/probe.h"
#include "base/status.h"

/* 1 when an MPI launcher started this process (Open MPI's mpirun, or a PMIx/PMI
 * launcher such as Slurm's srun), so probe should run as a rank; 0 for a plain start,
 * which needs no MPI at all. */
int dfl_mpi_launched(void);

/* MPI_Init (funneled threads: only the calling thread makes MPI calls) and this
 * process's rank and the number of ranks. DFL_ERR_IO when MPI fails to start. */
dfl_status dfl_mpi_start(int *argc, char ***argv, int *rank, int *size, dfl_error *err);

/* MPI_Finalize. */
void dfl_mpi_stop(void);

/* Collective over all ranks: run p (p->subset must be NULL) as this rank's share and
 * join the parts into p->out_path. On rank 0, p->progress sees totals over all ranks
 * and report (may be NULL) sums them (forward_seconds is the slowest rank's); other
 * ranks get no callbacks. Every rank returns the same status; err then names the
 * first failing rank ("rank 1: …"). Nothing is left at out_path on error. */
dfl_status dfl_probe_mpi_run(const dfl_probe_params *p, dfl_probe_report *report, dfl_error *err);

#endif
