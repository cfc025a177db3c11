#!/bin/sh
# The firmware is ready for a DPA's toolchain: its cores are RISC-V and its compiler is clang,
# so every firmware/src/*.c must build freestanding for riscv64 (rv64imac, no libc), and the
# objects may leave undefined only the HAL (hal_*) and the firmware's own functions. A handler
# that reaches for libc (memcpy, printf, ...) fails here, naming the symbol and the object.
#
#   check.sh SOURCE_DIR               check the firmware
#   check.sh SOURCE_DIR --self-test   also compile libc_call.c beside it: the check must reject it
#
# Exit 0 pass, 1 fail, 77 skip (clang missing or built without the RISC-V target).
set -eu
src=$1
self_test=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
CLANG=${CLANG:-clang}
target="--target=riscv64-unknown-elf -march=rv64imac -mabi=lp64"

if ! command -v "$CLANG" >/dev/null 2>&1; then
    echo "SKIP: $CLANG not found (Debian: apt-get install clang llvm)"
    exit 77
fi
if ! echo 'int x;' | "$CLANG" $target -ffreestanding -x c -c - -o /dev/null 2>/dev/null; then
    echo "SKIP: $CLANG cannot build for riscv64-unknown-elf"
    exit 77
fi
NM=${NM:-$(command -v llvm-nm || command -v nm)}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sources="$src/firmware/src/*.c"
[ "$self_test" = "--self-test" ] && sources="$sources $here/libc_call.c"
for f in $sources; do
    # shellcheck disable=SC2086
    "$CLANG" $target -ffreestanding -nostdlib -std=c11 -O2 -Wall -Wextra -Werror \
        -I"$src/firmware/include" -I"$src/hal/include" -c "$f" -o "$tmp/$(basename "$f" .c).o"
done

"$NM" --defined-only "$tmp"/*.o | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/defined"
bad=0
hal=""
for o in "$tmp"/*.o; do
    for s in $("$NM" -u "$o" | awk '$1 == "U" { print $2 }'); do
        case $s in
        hal_*) hal="$hal $s" ;;
        *)
            if ! grep -qx "$s" "$tmp/defined"; then
                echo "FAIL: $(basename "$o") needs $s, which is neither hal_* nor the firmware's own"
                bad=1
            fi
            ;;
        esac
    done
done
nobj=$(ls "$tmp"/*.o | wc -l)
hal=$(printf '%s\n' $hal | sort -u | tr '\n' ' ')
echo "$nobj objects for riscv64 (rv64imac, freestanding); undefined hal_*: $hal"

if [ "$self_test" = "--self-test" ]; then
    if [ $bad -eq 1 ]; then
        echo "PASS: the check rejects a firmware object that calls libc"
        exit 0
    fi
    echo "FAIL: libc_call.c calls memcpy, and the check did not notice"
    exit 1
fi
[ $bad -eq 0 ] && echo "PASS: only hal_* and the firmware's own symbols are undefined"
exit $bad
