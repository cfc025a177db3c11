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

# The Wireshark dissector is installed and loads where tshark is: an empty pcap read through it
# with a filter on its fields (an unknown field or a Lua error fails).
lua="$prefix/share/sdr/wireshark/sdr.lua"
test -f "$lua" || { echo "install check: $lua is missing" >&2; exit 1; }
if command -v tshark >/dev/null; then
    printf '\xd4\xc3\xb2\xa1\x02\x00\x04\x00\0\0\0\0\0\0\0\0\xff\xff\0\0\x01\0\0\0' > "$work/empty.pcap"
    if ! out=$(tshark -X lua_script:"$lua" -r "$work/empty.pcap" -Y "sdr.msg_id || sdr.ctrl.type" 2>&1) ||
        grep -q "Lua" <<<"$out"; then
        echo "install check: tshark does not load $lua: $out" >&2
        exit 1
    fi
    echo "install check: tshark loads the installed SDR dissector"
fi
