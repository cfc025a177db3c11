#!/usr/bin/env bash
# The walls between the rooms and floors, checked on the sources (usage: check.sh ROOT). Each
# emu part may include only its own headers and those of the parts below it; inside the NIC,
# neither engine includes the other's header; hal/ includes nothing of host/; the firmware
# includes only the HAL and freestanding C headers, and neither allocates nor throws; the CM's
# MAD codec includes nothing of the NIC.
# Prints every breach and exits 1 if there is one.
set -uo pipefail
root=${1:?usage: check.sh ROOT}
breaches=()

# The part whose include/ holds sdr/emu/NAME.
owner() {
    for part in wire link nic cm sim rt; do
        [ -f "$root/emu/$part/include/sdr/emu/$1" ] && { echo "$part"; return; }
    done
    echo "none"
}

sources() { [ -d "$1" ] && find "$1" \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \) -type f; }

# includes FILE...: "file header" per #include <...> line
includes() { [ $# -gt 0 ] && grep -HoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]+[>"]' "$@" |
    sed -E 's/:[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"]$/ \1/'; }

# emu parts: part -> the parts it may include
declare -A below=([wire]="wire" [link]="link wire" [nic]="nic wire" [cm]="cm nic wire" [sim]="sim nic link wire" [rt]="rt nic link wire")
for part in wire link nic cm sim rt; do
    mapfile -t files < <(sources "$root/emu/$part")
    while read -r file header; do
        [ -n "$file" ] || continue
        case $header in
        sdr/emu/*)
            o=$(owner "${header#sdr/emu/}")
            [[ " ${below[$part]} " == *" $o "* ]] || breaches+=("$file includes $header (emu/$o), which emu/$part may not")
            ;;
        sdr/firmware/* | sdr/hal/*)
            [ "$part" = wire ] || [ "$part" = link ] || continue
            breaches+=("$file includes $header: emu/$part knows no NIC")
            ;;
        sdr/host/* | sdr.h | sdr_*.h) breaches+=("$file includes $header: the emulator is below host/") ;;
        esac
    done < <(includes "${files[@]}")
done

# Inside the NIC: the SDR engine and the verbs engine share the core, never each other.
nic=$root/emu/nic
sdr_engine=("$nic/include/sdr/emu/nic.hpp" "$nic/include/sdr/emu/worker.hpp")
verbs_engine=("$nic/include/sdr/emu/verbs_engine.hpp" "$nic/include/sdr/emu/verbs.hpp")
core=("$nic/include/sdr/emu/nic_core.hpp" "$nic/include/sdr/emu/psn.hpp" "$nic/include/sdr/emu/fifo_ring.hpp" "$nic/src/nic_core.cpp")
mapfile -t sdr_src < <(sources "$nic/src/sdr")
mapfile -t verbs_src < <(sources "$nic/src/verbs")
check_engine() {  # name, forbidden headers (space list), files...
    local name=$1 forbidden=$2
    shift 2
    local existing=()
    for f in "$@"; do [ -f "$f" ] && existing+=("$f"); done
    while read -r file header; do
        [ -n "$file" ] || continue
        [[ " $forbidden " == *" $header "* ]] && breaches+=("$file includes $header: the $name may not")
    done < <(includes "${existing[@]}")
}
check_engine "SDR engine" "sdr/emu/verbs_engine.hpp sdr/emu/verbs.hpp" "${sdr_engine[@]}" "${sdr_src[@]}"
check_engine "verbs engine" "sdr/emu/nic.hpp sdr/emu/worker.hpp" "${verbs_engine[@]}" "${verbs_src[@]}"
check_engine "NIC core" "sdr/emu/nic.hpp sdr/emu/worker.hpp sdr/emu/verbs_engine.hpp sdr/emu/verbs.hpp" "${core[@]}"

# The CM's MAD codec is pure (a fuzzer links it alone): no header of any emu part but its own.
while read -r file header; do
    [ -n "$file" ] || continue
    case $header in
    sdr/emu/cm_mad.hpp) ;;
    sdr/*) breaches+=("$file includes $header: the MAD codec includes nothing of the NIC") ;;
    esac
done < <(includes "$root/emu/cm/include/sdr/emu/cm_mad.hpp" "$root/emu/cm/src/cm_mad.cpp")

# hal/ is the contract (and its conformance suite): nothing of host/.
mapfile -t hal_src < <(sources "$root/hal")
while read -r file header; do
    [ -n "$file" ] || continue
    case $header in
    sdr/host/* | sdr.h | sdr_*.h | */host/*) breaches+=("$file includes $header: hal/ includes nothing of host/") ;;
    esac
done < <(includes "${hal_src[@]}")

# The firmware: the HAL, its own headers and freestanding C; no allocation, no exceptions.
mapfile -t fw_src < <(sources "$root/firmware")
while read -r file header; do
    [ -n "$file" ] || continue
    case $header in
    sdr/hal/hal.h | sdr/firmware/* | stdint.h | stddef.h | stdbool.h | stdatomic.h) ;;
    *) breaches+=("$file includes $header: the firmware sees only hal.h and freestanding headers") ;;
    esac
done < <(includes "${fw_src[@]}")
if [ ${#fw_src[@]} -gt 0 ]; then
    while IFS= read -r hit; do
        breaches+=("$hit: the firmware neither allocates nor throws")
    done < <(grep -HnE '\b(malloc|calloc|realloc|free|new|delete|throw|try)\b' "${fw_src[@]}" | grep -vE ':[0-9]+:[[:space:]]*(/?\*|//)')
fi

if [ ${#breaches[@]} -gt 0 ]; then
    printf 'wall breached: %s\n' "${breaches[@]}"
    exit 1
fi
echo "walls hold: emu parts, NIC engines, hal/, firmware"
