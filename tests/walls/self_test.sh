#!/usr/bin/env bash
# check.sh must fail on each kind of breach: a copy of the tree with one planted include (or
# allocation) per case, and the message that names it (usage: self_test.sh ROOT CASE).
set -euo pipefail
root=${1:?usage: self_test.sh ROOT CASE}
case_=${2:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -a "$root/emu" "$root/hal" "$root/firmware" "$tmp/"
case $case_ in
wire-includes-nic) f=$tmp/emu/wire/src/wire.cpp; line='#include <sdr/emu/nic.hpp>'; want='which emu/wire may not' ;;
hal-includes-host) f=$tmp/hal/include/sdr/hal/hal.h; line='#include <sdr/host/device.hpp>'; want='hal/ includes nothing of host/' ;;
sdr-engine-includes-verbs) f=$tmp/emu/nic/src/sdr/nic_tx.cpp; line='#include <sdr/emu/verbs_engine.hpp>'; want='the SDR engine may not' ;;
verbs-engine-includes-sdr) f=$tmp/emu/nic/src/verbs/tx.cpp; line='#include <sdr/emu/nic.hpp>'; want='the verbs engine may not' ;;
nic-includes-cm) f=$tmp/emu/nic/src/verbs/gsi.cpp; line='#include <sdr/emu/cm_agent.hpp>'; want='which emu/nic may not' ;;
cm-mad-includes-nic) f=$tmp/emu/cm/src/cm_mad.cpp; line='#include <sdr/emu/verbs_engine.hpp>'; want='the MAD codec includes nothing of the NIC' ;;
firmware-allocates) f=$tmp/firmware/src/rx.c; line='static void *p(void) { return malloc(8); }'; want='neither allocates nor throws' ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
printf '%s\n' "$line" >> "$f"
if out=$("$root/tests/walls/check.sh" "$tmp"); then
    echo "check.sh passed a tree with a planted breach ($case_): $line in $f"
    exit 1
fi
grep -qF "$want" <<<"$out" || { echo "check.sh failed, but without naming the breach ($want): $out"; exit 1; }
echo "check.sh rejects $case_: $(head -1 <<<"$out")"
