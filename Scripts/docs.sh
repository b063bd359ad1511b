#!/usr/bin/env bash
# `make docs`: the DocC site of every library product, as one combined archive for static hosting,
# in .build/docs. Fails on any DocC warning (an unresolved link, a parameter documented wrongly),
# on a public symbol without a documentation comment, and when a page does not render its title and
# first paragraph in a headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
products=$($SWIFT package dump-package | python3 -c '
import json, sys
package = json.load(sys.stdin)
print(" ".join(p["name"] for p in package["products"] if "library" in p["type"]))')
# Each library product is one target of the same name.
args=()
for product in $products; do args+=(--product "$product"); done
mkdir -p .build
log=.build/docs.log
rm -rf .build/docs
# The plugin's progress (two lines per product) goes to the log, shown whole only when it fails.
echo "Building the documentation of $(wc -w <<<"$products") products (log: $log)"
if ! $SWIFT package --allow-writing-to-directory .build/docs generate-documentation "${args[@]}" \
  --enable-experimental-combined-documentation --transform-for-static-hosting --output-path .build/docs >"$log" 2>&1; then
  cat "$log"
  echo "make docs: the documentation plugin failed"
  exit 1
fi
# SwiftPM's notes about files in dependencies' checkouts are not the documentation's.
if grep -E '^(warning|error):' "$log" | grep -v 'which are unhandled'; then
  echo "make docs: DocC reported the warnings above"
  exit 1
fi
python3 Scripts/docs-guide-links.py .build/docs
# The plugin puts the symbol graphs under a folder named after the package's checkout folder.
symbols=$(dirname "$(find "$(dirname "$($SWIFT build --show-bin-path)")/extracted-symbols" -mindepth 2 -maxdepth 2 -type d -name BufferQueue | head -1)")
python3 Scripts/doc-coverage.py "$symbols" $products
python3 Scripts/check-docs-site.py .build/docs $products
echo "The site is in .build/docs: serve it (python3 -m http.server -d .build/docs) and open /documentation/bufferqueue"
