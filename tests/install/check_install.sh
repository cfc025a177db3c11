#!/usr/bin/env bash
# check_install.sh PREFIX: the install tree works from outside the build tree, wherever it is:
# - every installed header compiles alone as C11;
# - a C program built with pkg-config sdr and libsdr's directory as its RPATH (the README's
#   command line) runs with no environment;
# - the installed example (share/doc/sdr/examples) builds with its own CMakeLists.txt, which
#   finds libsdr by pkg-config, and runs with no environment, also from a moved prefix;
# - the installed programs run with no environment at all (their RPATH is $ORIGIN-relative),
#   also after the whole prefix moved elsewhere;
# - find_package(sdr) from a small CMake project gives sdr::sdr, whose program runs;
# - every installed man page passes mandoc's lint, and man -l renders it without a warning;
# - the Wireshark dissector loads in tshark.
set -euo pipefail
prefix=$(cd "$1" && pwd)
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
includedir=$(pkg-config --variable=includedir sdr)
headers=$(cd "$includedir" && ls sdr*.h)
for h in $headers; do
    printf '#include <%s>\n' "$h" | cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -x c - $(pkg-config --cflags sdr) ||
        { echo "install check: $h does not compile alone as C11" >&2; exit 1; }
done
echo "install check: each of the $(echo "$headers" | wc -w) installed headers compiles alone as C11"

# The README's command line: the program finds libsdr through its RPATH, with no environment.
cc -std=c11 -Wall -Werror "$work/app.c" -o "$work/app" $(pkg-config --cflags --libs sdr) \
    -Wl,-rpath,"$(pkg-config --variable=libdir sdr)"
env -i "$work/app" || { echo "install check: the pkg-config program does not run with libdir as its RPATH" >&2; exit 1; }
echo "install check: a C program built with pkg-config sdr runs"

# No LD_LIBRARY_PATH, no PATH, nothing: the programs find libsdr through $ORIGIN.
for p in sdr-model sdr_demo sdr_write_bw sdr_sweep sdr-pcap sdr-stat sdr_traffic; do
    env -i "$prefix/bin/$p" --help >/dev/null || { echo "install check: $prefix/bin/$p --help fails with no environment" >&2; exit 1; }
done
env -i "$prefix/bin/sdr-model" --size 1M --json | grep -q '"size_bytes":1048576' ||
    { echo "install check: sdr-model from the prefix computes nothing" >&2; exit 1; }
cp -a "$prefix" "$work/moved"
env -i "$work/moved/bin/sdr_demo" --size 64K --rtt-ms 1 --loss 0 --scheme sr --pcap '' | grep -q "delivered byte-exact" ||
    { echo "install check: sdr_demo does not run from a moved prefix" >&2; exit 1; }
# The traffic generator's distributions are compiled in: no data path to find from a prefix.
env -i SDR_SIM_RTT_MS=0.01 "$work/moved/bin/sdr_traffic" --cdf datamining --duration-ms 1 | grep -q ", failed 0$" ||
    { echo "install check: sdr_traffic --cdf datamining does not run from a moved prefix" >&2; exit 1; }
echo "install check: the programs run with no environment, also from a moved prefix"

# find_package(sdr): a CMake project links sdr::sdr and runs (from the moved prefix, too).
mkdir -p "$work/cmake_app"
cp "$work/app.c" "$work/cmake_app/app.c"
cat > "$work/cmake_app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(sdr_install_check C)
find_package(sdr 0.1 REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE sdr::sdr)
CMAKE
for p in "$prefix" "$work/moved"; do
    rm -rf "$work/cmake_build"
    cmake -S "$work/cmake_app" -B "$work/cmake_build" -DCMAKE_PREFIX_PATH="$p" >/dev/null
    cmake --build "$work/cmake_build" >/dev/null
    env -i "$work/cmake_build/app" || { echo "install check: the find_package(sdr) program from $p fails" >&2; exit 1; }
done
echo "install check: find_package(sdr) gives sdr::sdr, and its program runs"

# The example for newcomers, built as its CMakeLists.txt says, from the prefix and a moved copy.
examples=$prefix/share/doc/sdr/examples
test -f "$examples/one_message.c" -a -f "$examples/CMakeLists.txt" || { echo "install check: $examples is incomplete" >&2; exit 1; }
for p in "$prefix" "$work/moved"; do
    rm -rf "$work/example" "$work/example_build"
    cp -r "$p/share/doc/sdr/examples" "$work/example"
    PKG_CONFIG_PATH="$p/lib/pkgconfig:$p/lib/x86_64-linux-gnu/pkgconfig" \
        cmake -S "$work/example" -B "$work/example_build" >/dev/null
    cmake --build "$work/example_build" >/dev/null
    env -i "$work/example_build/one_message" | grep -q "all 19 chunk bits set, bytes and immediate 0x5d12 as sent" ||
        { echo "install check: the example built from $p does not run" >&2; exit 1; }
done
echo "install check: the installed example builds with its CMakeLists.txt (pkg-config) and runs"

# Every man page is well-formed and renders. mandoc's lint (its own parser, no data files)
# checks each page; man -l then renders it through groff, whose warnings (bad requests, unknown
# escapes) fail the check. A machine whose man cannot render even a minimal page (an image that
# drops groff's macro files, say) says so, and the pages rest on mandoc's check there.
pages=$(find "$prefix/share/man" -type f | sort)
[ "$(echo "$pages" | wc -l)" -ge 9 ] || { echo "install check: man pages missing: $pages" >&2; exit 1; }
if command -v mandoc >/dev/null; then
    for page in $pages; do
        lint=$(mandoc -T lint -W warning "$page" 2>&1) || true
        [ -z "$lint" ] || { echo "install check: mandoc -T lint: $lint" >&2; exit 1; }
    done
    echo "install check: mandoc finds no warning in $(echo "$pages" | wc -l) pages"
fi
if command -v man >/dev/null; then
    printf '.TH PROBE 1\n.SH NAME\nprobe \\- probe\n' > "$work/probe.1"
    if ! probe=$(MANWIDTH=80 man -l "$work/probe.1" 2>&1) || ! grep -q "NAME" <<<"$probe"; then
        echo "install check: man here cannot render even a minimal page (${probe:-no output}); man -l not checked"
    else
        for page in $pages; do
            err=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || true
            out=$(MANWIDTH=80 man -l "$page" 2>/dev/null)
            if [ -n "$err" ] || ! grep -q "NAME" <<<"$out"; then
                echo "install check: man -l $page: ${err:-renders nothing}" >&2
                exit 1
            fi
        done
        echo "install check: man -l renders $(echo "$pages" | wc -l) pages without a warning"
    fi
fi

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
