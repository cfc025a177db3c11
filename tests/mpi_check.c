/* An MPI job that checks what it moved, for the MPI runs on the verbs device (Open MPI's pml ucx,
 * MPICH's ch4:ucx): an Allreduce whose sum each rank can predict, and a large Sendrecv around the
 * ring whose bytes each rank can predict, compared byte for byte. Exit 0 and one line from rank 0
 * when every rank agrees; any mismatch names the rank and offset and exits 1.
 *
 *   mpi_check [BYTES]   (the Sendrecv's size; default 8 MiB, large enough for UCX's rendezvous)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Byte i of what rank r sends: a pattern no two ranks or offsets share within a period of 251. */
static unsigned char pattern(int rank, size_t i) { return (unsigned char)((i * 131u + (unsigned)rank * 17u + 7u) % 251u); }

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)8 << 20;
    int failed = 0;

    /* Allreduce: 4096 int64 elements, element j of rank r = r * 1000003 + j; the sum over ranks
     * is size * j + 1000003 * size * (size - 1) / 2. */
    enum { kElems = 4096 };
    int64_t* in = malloc(kElems * sizeof *in);
    int64_t* out = malloc(kElems * sizeof *out);
    for (int j = 0; j < kElems; j++) in[j] = (int64_t)rank * 1000003 + j;
    MPI_Allreduce(in, out, kElems, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < kElems && !failed; j++) {
        int64_t want = (int64_t)size * j + (int64_t)1000003 * size * (size - 1) / 2;
        if (out[j] != want) {
            fprintf(stderr, "mpi_check: rank %d: allreduce element %d is %lld, expected %lld\n", rank, j,
                    (long long)out[j], (long long)want);
            failed = 1;
        }
    }

    /* Sendrecv around the ring: send to rank + 1, receive from rank - 1. */
    unsigned char* sbuf = malloc(bytes);
    unsigned char* rbuf = malloc(bytes);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "mpi_check: rank %d: cannot allocate 2 x %zu bytes\n", rank, bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    for (size_t i = 0; i < bytes; i++) {
        sbuf[i] = pattern(rank, i);
        rbuf[i] = 0;
    }
    /* MPI counts are int: the buffer goes as chunks of at most 1 GiB. */
    for (size_t off = 0; off < bytes;) {
        int n = bytes - off > (1u << 30) ? (1 << 30) : (int)(bytes - off);
        MPI_Sendrecv(sbuf + off, n, MPI_BYTE, to, 7, rbuf + off, n, MPI_BYTE, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        off += (size_t)n;
    }
    for (size_t i = 0; i < bytes && !failed; i++) {
        if (rbuf[i] != pattern(from, i)) {
            fprintf(stderr, "mpi_check: rank %d: byte %zu from rank %d is %u, expected %u\n", rank, i, from, rbuf[i],
                    pattern(from, i));
            failed = 1;
        }
    }

    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any) printf("mpi_check: %d ranks: allreduce of %d elements and sendrecv of %zu bytes exact\n", size, kElems, bytes);
    free(in);
    free(out);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return any ? 1 : 0;
}
