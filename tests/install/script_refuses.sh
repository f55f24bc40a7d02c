#!/bin/sh
# script_refuses.sh SCRIPT REGEX [ARG...]: SCRIPT (a tools/ script that installs and builds, such
# as the README's commands) run with ARGs must exit 2 with a line matching the extended REGEX.
# It runs as a lone copy in a scratch tools/ folder, so that a script that failed to refuse finds
# none of the repository's other scripts and stops there, instead of installing packages or
# reconfiguring the build directory under the test.
script=$1 regex=$2
shift 2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/tools" && cp "$script" "$dir/tools/" || exit 1
out=$(timeout 30 bash "$dir/tools/$(basename "$script")" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 2 ] || { echo "script_refuses.sh: exit status $rc, wanted 2" >&2; exit 1; }
printf '%s\n' "$out" | grep -Eq -- "$regex" || { echo "script_refuses.sh: no line matches '$regex'" >&2; exit 1; }
