#!/bin/sh
# expect_status.sh NAME EXPECTED program args...: run the program; when its exit status is not
# EXPECTED, print a marker naming the test, which its FAIL_REGULAR_EXPRESSION catches
# (cmake/SdrTest.cmake). The name keeps a test that runs another test's command apart from it.
name=$1
expected=$2
shift 2
# CMake drops empty list items, so the test passes an empty argument as <empty>.
for a do
    shift
    [ "$a" = "<empty>" ] && a=""
    set -- "$@" "$a"
done
"$@"
rc=$?
[ "$rc" -eq "$expected" ] || echo "SDR_TEST_EXIT_STATUS[$name] $rc, expected $expected"
exit 0
