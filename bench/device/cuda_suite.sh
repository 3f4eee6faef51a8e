#!/bin/bash
# On the lent GPU machine (one call, carry [".dev"]): unpack TVM and the rules, then the suite's three models
# named for CUDA in issue #6 on a CUDA target with TVM's default GPU schedules (DLight), each in its own
# time box; results to $OUT (log.txt, and a JSON and chart per model).
exec > >(tee -a "$OUT/log.txt") 2>&1
set -x
date -u
mkdir -p /tmp/site
xz -d < .dev/tvm.tar.xz | tar x -C /tmp/site || exit 4
xz -d < .dev/rules.tar.xz | tar x || exit 4  # rules/ in the repository's root, where the package reads it
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
CUDART=$(find / -xdev -name 'libcudart.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$(dirname "$CUDART"):/tmp/site/tvm/lib:/tmp/site/tvm_ffi/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi -L
python3 -c "import tvm; print(tvm.__version__, 'cuda', tvm.cuda(0).exist, tvm.cuda(0).compute_version)" || exit 5
T='{"kind": "cuda", "arch": "sm_90"}'
for spec in ${MODELS:-resnext50:110 inception_v3:130 nasnet_mobile:200}; do
  m=${spec%%:*}; s=${spec##*:}
  mkdir -p "$OUT/$m"
  timeout "$s" python3 -m bench.run --target "$T" --models "$m" --rounds 9 --min-rounds 5 --model-budget-s 25 \
     --readme no --results-dir "$OUT/$m" --work-dir /tmp/work
  echo "exit $m: $?"
done
date -u
