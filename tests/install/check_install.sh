#!/usr/bin/env bash
# Build a program against the installed SDR (sdr.pc) the way an application would, and run it.
set -euo pipefail
prefix=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/app.c" <<'C'
#include <sdr.h>
#include <sdr_ext.h>
#include <sdr_mr.h>
#include <stdio.h>
int main(void)
{
    struct sdr_dev_attr da = {2, 1};
    struct sdr_context *ctx = sdr_context_create("sim:0", &da);
    if (!ctx) { fprintf(stderr, "%s\n", sdr_last_error()); return 1; }
    if (sdr_context_create("nonexistent", &da) != NULL || sdr_last_error()[0] == 0) return 1;
    struct sdr_qp_attr qa = {16, 24, 2, SDR_MTU_4096, 1, 1, 0};
    struct sdr_qp_attr_ext ext, got;
    sdr_qp_attr_ext_init(&ext);
    ext.num_generations = 3;
    struct sdr_qp *qp = sdr_qp_create_ext(ctx, &qa, &ext);
    if (!qp || sdr_qp_attr_ext_get(qp, &got) != SDR_SUCCESS || got.num_generations != 3) return 1;
    return sdr_qp_destroy(qp) == SDR_SUCCESS && sdr_context_destroy(ctx) == SDR_SUCCESS ? 0 : 1;
}
C
cc -std=c11 -Wall -Werror "$work/app.c" -o "$work/app" $(pkg-config --cflags --libs sdr)
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib/x86_64-linux-gnu" "$work/app"
echo "install check: a C program built with pkg-config sdr runs"
