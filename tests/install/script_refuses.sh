#!/bin/sh
# script_refuses.sh SCRIPT REGEX [ARG...]: SCRIPT (a tools/ script that installs and builds, such
# as the README's commands) run with ARGs must exit 2 with a line matching the extended REGEX
# (tests/bench/expect.sh checks both). It runs as a lone copy in a scratch tools/ folder, so that
# a script that failed to refuse finds none of the repository's other scripts and stops there,
# instead of installing packages or reconfiguring the build directory under the test.
script=$1 regex=$2
shift 2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/tools" && cp "$script" "$dir/tools/" || exit 1
EXPECT_SECONDS=30 sh "$(dirname "$0")/../bench/expect.sh" 2 "$regex" bash "$dir/tools/$(basename "$script")" "$@"
