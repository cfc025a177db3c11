#!/usr/bin/env bash
# twin_smoke.sh SDR_TWIN SDR_WRITE_BW: sdr-twin on one tiny point (256 KiB at drop 1e-2, sr and
# ec-mds:4,2, 3 messages, 1 ms added each way): every message delivered on both sides, each row
# has the real and simulated times, the simulator ran on the RTT the real sender measured, and
# the EC row has its EC/SR ratios. Exits 77 (skipped) where sdr-twin does: without root or jq.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rc=0
"$1" --write-bw "$2" --sizes 256K --drops 1e-2 --schemes "sr ec-mds:4,2" -n 3 -w 1 --delay-ms 1 \
    --csv "$work/twin.csv" || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
# The scheme, quoted, holds a comma: name it by its kind before splitting the line.
sed 's/"ec-[^"]*"/ec/; s/"sr"/sr/' "$work/twin.csv" | awk -F, '
NR == 1 { next }
{ rows++ }
$8 != 0 || $16 != 0 { print "failed messages: " $0; bad = 1 }
!($5 >= 2 && $13 > 0) { print "no real time of at least the added 2 ms RTT, or no simulated time: " $0; bad = 1 }
!($13 >= $9) { print "the simulated message took less than the RTT it was given: " $0; bad = 1 }
$3 == "ec" && ($18 == "" || $19 == "") { print "no EC/SR ratios on the EC row: " $0; bad = 1 }
END {
    if (rows != 2) { print "expected 2 points, got " rows; bad = 1 }
    exit bad
}' || { cat "$work/twin.csv"; exit 1; }
echo "sdr-twin: one point, real and simulated, with its EC/SR ratios"
