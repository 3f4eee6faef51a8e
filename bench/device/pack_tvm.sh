#!/bin/bash
# Pack TVM's wheels for a lent GPU machine (Python 3.12, nothing reachable from it) in two parts of at most
# 45 MB each, under .dev/a and .dev/b (git-ignored), for two device calls: see README.md beside this file.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
work=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$work/whl" \
    apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post0
mkdir -p "$work/site"
for w in "$work"/whl/*.whl; do (cd "$work/site" && unzip -q -o "$w"); done
tar cf - -C "$work/site" . | xz -9 -T0 > "$work/tvm.tar.xz"  # 66 MB from the 100 MB wheel
mkdir -p .dev/a .dev/b
split -b 45000000 "$work/tvm.tar.xz" "$work/part."
mv "$work/part.aa" .dev/a/tvm.a
mv "$work/part.ab" .dev/b/tvm.b
cp bench/device/cuda_suite.sh .dev/b/
grep -qx '/.dev/' "$(git rev-parse --git-dir)/info/exclude" 2>/dev/null || echo '/.dev/' >> "$(git rev-parse --git-dir)/info/exclude"
rm -rf "$work"
ls -la .dev/a .dev/b
