#!/bin/sh
# expect.sh RC REGEX CMD...: runs CMD (EXPECT_SECONDS, default 60 s, at most) and passes only if it exits with RC and its
# output (stdout and stderr) has a line matching the extended REGEX. CTest's own
# PASS_REGULAR_EXPRESSION ignores the exit status, which is half of what these tests check.
want_rc=$1 regex=$2
shift 2
out=$(timeout "${EXPECT_SECONDS:-60}" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$want_rc" ]; then
  echo "expect.sh: exit status $rc, wanted $want_rc: $*" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "expect.sh: no line matches '$regex': $*" >&2
  exit 1
fi
