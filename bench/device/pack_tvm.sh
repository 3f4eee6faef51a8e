#!/bin/bash
# Pack what a lent GPU machine needs (Python 3.12, no registry reachable) into .dev/ (git-ignored): TVM's pinned
# wheels without the CUTLASS headers, xz with a 384 MiB window (64.2 MB from the 100 MB wheel), and the rule
# files (0.4 MB from 16 MB). With the tree slimmed (slim_tree.sh) one device call carries it all: README.md.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
work=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$work/whl" \
    apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post0
mkdir -p "$work/site" .dev
for w in "$work"/whl/*.whl; do (cd "$work/site" && unzip -q -o "$w"); done
rm -rf "$work/site/tvm/3rdparty"  # CUTLASS's headers, for TVM's CUTLASS offload only
tar cf - -C "$work/site" . | xz -9e --lzma2=preset=9e,dict=384MiB -T1 > .dev/tvm.tar.xz  # about 5 min
git ls-files -z rules | tar cf - --null -T - | xz -9 > .dev/rules.tar.xz
cp bench/device/cuda_suite.sh .dev/
grep -qx '/.dev/' "$(git rev-parse --git-dir)/info/exclude" 2>/dev/null || echo '/.dev/' >> "$(git rev-parse --git-dir)/info/exclude"
rm -rf "$work"
ls -la .dev
