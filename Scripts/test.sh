#!/usr/bin/env bash
# Runs `swift test` with the given arguments, keeps its output in a log, and on failure repeats
# the failing tests' lines at the end, where a truncated CI log still shows them.
set -uo pipefail
log=$(mktemp /tmp/swift-audio-queue-test.XXXXXX)
"${SWIFT:-swift}" test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" != 0 ]; then
  echo
  echo "=== failures (swift test $*) ==="
  sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E "✘|error:|Fatal error|ThreadSanitizer|SUMMARY" | grep -v "^✘ Test run" | head -60
  echo "=== end of failures ==="
fi
rm -f "$log"
exit "$status"
