#!/usr/bin/env bash
# One command on a GPU machine: measure the CUDA agents' interference matrix under
# time-slicing, plan the example GPU agents from it, and verify the plan on the GPU(s).
#
#   bash scripts/contend-gpu.sh [OUT_DIR]        (default: contend-gpu-<UTC time>)
#
# Needs an NVIDIA driver (libcuda) and cuFFT/cuBLAS libraries at run time; builds without
# a CUDA toolkit (cudarc loads them dynamically). Environment knobs:
#   TRIALS=3 DURATION=3s   matrix and verify trials and window per run
#   MODE=time-slicing      or mps (start `nvidia-cuda-mps-control -d` first)
#   DEVICES=0              the CUDA device the matrix shares; verify uses device g for
#                          planned device g unless VERIFY_DEVICES=0,1,... is given
# Writes OUT_DIR/{matrix.toml,matrix.json,matrix.svg,plan.json,plan.txt,verify.json,verify.txt}
# and exits with verify's status (1 when an objective is missed).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-contend-gpu-$(date -u +%Y%m%dT%H%M%SZ)}"
trials="${TRIALS:-3}"
duration="${DURATION:-3s}"
mode="${MODE:-time-slicing}"
devices="${DEVICES:-0}"
mkdir -p "$out"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "contend-gpu: no NVIDIA GPU found (nvidia-smi -L failed); nothing measured" >&2
    exit 2
fi
nvidia-smi -L | tee "$out/gpus.txt"
gpus=$(nvidia-smi -L | grep -c '^GPU ' || true)

cargo build --release -p tailcut-cli --features cuda
tailcut=target/release/tailcut

echo "== 1. interference matrix: cuda-fft, cuda-gemm ($mode, $trials trials × $duration, with triples)"
# A second copy of each agent measures it against itself (x<-x) and gives the triples
# the composition model is fitted on.
"$tailcut" contend matrix \
    --agent cuda-fft --agent cuda-gemm --agent cuda-fft --agent cuda-gemm \
    --mode "$mode" --devices "$devices" --triples --trials "$trials" --duration "$duration" \
    --table "$out/matrix.toml" --heatmap "$out/matrix.svg" --json-out "$out/matrix.json" | tee "$out/matrix.txt"

echo "== 2. plan the example GPU agents from the measured table ($gpus GPU(s) here)"
pool="$out/pool.toml"
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$model" in
    *H200*) key="h200-141gb" ;;
    *H100*) key="h100-80gb" ;;
    *A100*80GB*) key="a100-80gb" ;;
    *A100*) key="a100-40gb" ;;
    *) key="h100-80gb" ;; # memory and MIG rules of an H100; this GPU is verified as-is
esac
modes='"dedicated", "time-slicing"'
[ "$mode" = mps ] && modes='"dedicated", "mps"'
cat >"$pool" <<EOF
model = "$key"
count = $((gpus > 0 ? gpus : 1))
modes = [$modes]
max_share = 3
EOF
"$tailcut" contend plan --agents examples/contend/gpu-agents.toml --gpus "$pool" --table "$out/matrix.toml" | tee "$out/plan.txt"
"$tailcut" contend plan --agents examples/contend/gpu-agents.toml --gpus "$pool" --table "$out/matrix.toml" --json >"$out/plan.json"

echo "== 3. verify the plan on the GPU(s)"
verify_devices="${VERIFY_DEVICES:-$(seq -s, 0 $((gpus - 1)))}"
status=0
"$tailcut" contend verify "$out/plan.json" --gpu --devices "$verify_devices" --trials "$trials" --duration "$duration" \
    --json-out "$out/verify.json" | tee "$out/verify.txt" || status=${PIPESTATUS[0]}
echo "contend-gpu: results in $out (verify exit $status)"
exit "$status"
