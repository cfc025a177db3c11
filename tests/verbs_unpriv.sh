#!/usr/bin/env bash
# verbs_unpriv.sh BINDIR PREFIX: the whole verbs testbed without root, as CI on a hosted runner
# has it (tests/verbs_unpriv_test.cpp runs it as user nobody). BINDIR holds sdr-netns, sdr-rdma
# and the provider with the interception library beside it. Two ways, each two network
# namespaces on a veth with a raw: device in each, moving data with unmodified programs through
# `sdr-rdma exec`:
#   1. sdr-netns as the user (its holder: separate commands share the testbed, as a CI job's
#      steps do): perftest's ib_write_bw, RC, server and client.
#   2. all inside `unshare -Urnm`: librdmacm's rping through the interception library, each
#      ping's data validated (-V).
# Prints each program's output and a line "NAME: client=N server=N" with the exit statuses.
set -u
bin=$1 prefix=$2
netns=$bin/sdr-netns rdma=$bin/sdr-rdma
export SDR_RDMA_PROVIDER=$bin/libsdr_verbs
state=$(mktemp -d)  # each way's own device state, removed at the end
trap '"$netns" down --prefix "$prefix" >/dev/null 2>&1; rm -rf "$state"' EXIT

# Polls (bounded) until the command succeeds: a server is ready.
until_ready() {
    for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done
    echo "never ready: $*"
    return 1
}

# 1. The holder.
export SDR_RDMA_DIR=$state/holder
"$netns" up --prefix "$prefix" || exit 3
on() { local ns=$prefix-$1; shift; "$netns" exec "$ns" "$@"; }
on a "$rdma" link add sdrua netdev "$prefix-a" raw >/dev/null || exit 4
on b "$rdma" link add sdrub netdev "$prefix-b" raw >/dev/null || exit 4
on b timeout 60 "$rdma" exec --dev sdrub -- ib_write_bw -d sdrub -x 0 -s 65536 -n 1000 >"$state/bw-server.log" 2>&1 &
server=$!
listening() { on b ss -Hltn 'sport = :18515' | grep -q .; }
until_ready listening
on a timeout 60 "$rdma" exec --dev sdrua -- ib_write_bw -d sdrua -x 0 -s 65536 -n 1000 10.77.0.2 2>&1
client=$?
wait "$server"
status=$?
cat "$state/bw-server.log"
echo "ib_write_bw: client=$client server=$status"
"$netns" down --prefix "$prefix"

# 2. Inside unshare -Urnm: sdr-netns makes its namespaces in a private /run/netns there.
SDR_RDMA_DIR=$state/urnm unshare -Urnm bash -c '
    netns=$1 rdma=$2 prefix=$3 log=$4/rping-server.log
    on() { local ns=$prefix-$1; shift; "$netns" exec "$ns" "$@"; }
    "$netns" up --prefix "$prefix" >/dev/null || exit 3
    on a "$rdma" link add sdrua netdev "$prefix-a" raw >/dev/null || exit 4
    on b "$rdma" link add sdrub netdev "$prefix-b" raw >/dev/null || exit 4
    on b timeout 60 env SDR_RDMA_CM_TRACE=1 "$rdma" exec --dev sdrub -- rping -s -a 10.77.0.2 -C 10 -V >"$log" 2>&1 &
    server=$!
    for _ in $(seq 300); do grep -q ": LISTEN id " "$log" && break; sleep 0.1; done
    on a timeout 60 "$rdma" exec --dev sdrua -- rping -c -a 10.77.0.2 -C 10 -V -v 2>&1
    client=$?
    wait "$server"
    status=$?
    cat "$log"
    echo "rping: client=$client server=$status"
' urnm "$netns" "$rdma" "$prefix" "$state"
