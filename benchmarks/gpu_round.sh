#!/usr/bin/env bash
# One round on a lent GPU machine (issues #45, #48): the plans' memory on CUDA, then the GPU
# check's timings alone. Run from the repository root there, with $OUT the folder that comes
# back (at most 8 files; this writes 7):
#
#     MEM_S=240 CHECK_S=220 bash benchmarks/gpu_round.sh
#
# The memory benchmarks run side by side: each reads its own process's allocator
# (torch.cuda.max_memory_allocated), which no other process changes. The GPU check times
# steps, so it runs alone after them. The advisor is installed into /tmp/site and run from
# /tmp (see benchmarks/gpu_check.py: from the checkout, `advisor` would be the source folder,
# which has no `advisor.probes`).
set -u
ROOT=$(pwd)
OUT=${OUT:-/tmp/gpu-round}
MEM_S=${MEM_S:-240}
CHECK_S=${CHECK_S:-220}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps --no-build-isolation --no-index --target /tmp/site . || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
B=$ROOT/benchmarks
cd /tmp || exit 1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)"
} >"$OUT/gpu_check.log" 2>&1
conf() {  # $1: name, $2: workloads
  timeout "$MEM_S" python3 "$B/plan_conformance.py" --device cuda --hold --workloads "$2" \
    --json "$OUT/conf_$1.json" >>"$OUT/memory.log" 2>&1
}
conf conv fcn,simple-cnn,examples.my_torch_model:build &
conf gpt2 examples.transformers:gpt2_mini &
conf bert examples.transformers:bert_base &
timeout "$MEM_S" python3 "$B/fine_tuning.py" --device cuda --json "$OUT/ft.json" >>"$OUT/memory.log" 2>&1 &
wait
timeout "$CHECK_S" python3 "$B/gpu_check.py" --budget-s $((CHECK_S - 25)) --json \
  >"$OUT/gpu_check.json" 2>>"$OUT/gpu_check.log"
echo "round done: $(date -u)" >>"$OUT/gpu_check.log"
