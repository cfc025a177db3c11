#!/usr/bin/env bash
# json_valid.sh BINDIR JSON_CHECK: every tool with --json prints valid JSON (json_check parses it
# with nlohmann-json): sdr-model, and sdr-pcap summary on a capture sdr_demo writes. sdr_write_bw's
# JSON is parsed by its own tests (write_bw_util.hpp), which need namespaces.
set -euo pipefail
bin=$1
check=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/sdr-model" --json | "$check"
"$bin/sdr-model" --drop 0.9 --json | "$check"   # unbounded expectations: null, not inf
"$bin/sdr_demo" --size 1M --rtt-ms 1 --loss 0.01 --scheme sr --scheme ec-mds:4,2 --pcap "$work/d.pcapng" >/dev/null
"$bin/sdr-pcap" summary "$work/d.pcapng" --json | "$check"
echo "every --json output parses"
