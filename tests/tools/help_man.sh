#!/usr/bin/env bash
# help_man.sh MANDIR TOOL [SUBCOMMAND]: the options TOOL's --help lists and those its man page
# MANDIR/TOOL.1 describes (the tags of its .TP paragraphs) are the same set (-h/--help aside).
set -euo pipefail
mandir=$1
tool=$2
shift 2
name=$(basename "$tool")
page=$mandir/$name.1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# grep, where finding nothing is no error (sdr-rdma has no options); its trouble (2) still is.
matches() { grep "$@" || [ $? -eq 1 ]; }
# --help: option words at the start of a line or after a space, comma, bracket or bar.
{ "$tool" --help; [ $# -eq 0 ] || "$tool" "$@" --help; } |
    matches -oE '(^|[][ ,|(])--?[A-Za-z][A-Za-z0-9_-]*' | sed 's/^[][ ,|(]//' |
    matches -vxE -- '-h|--help' | sort -u > "$work/help"
# The man page: the line after each .TP, with roff's \- as -.
awk 'tp { print; tp = 0 } /^\.TP/ { tp = 1 }' "$page" | sed 's/\\-/-/g; s/\\f[BIRP]//g' |
    matches -oE '(^|[ ,])--?[A-Za-z][A-Za-z0-9_-]*' | sed 's/^[ ,]//' |
    matches -vxE -- '-h|--help' | sort -u > "$work/man"
if ! diff -u "$work/help" "$work/man" > "$work/diff"; then
    echo "$name: --help (-) and $page (+) disagree on the options:" >&2
    cat "$work/diff" >&2
    exit 1
fi
echo "$name: --help and $name.1 list the same $(wc -l < "$work/help") options"
