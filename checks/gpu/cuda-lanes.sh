#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds the CUDA engine, checks split parity on it against
# the whole model on the same GPU, and runs the route bench's lanes (whole model, route of 2,
# route of 3) on SmolLM2 and on a synthetic model big enough that the GPU does real work.
# Writes one JSON per step and a summary (cuda-lanes.json) to OUT.
#
#   checks/gpu/cuda-lanes.sh [OUT]           the real run (default OUT: ./gpu-results)
#   STRATA_GPU_DRY=1 checks/gpu/cuda-lanes.sh  the same steps on the CPU backend, for a machine
#                                            without a GPU (checks the script, not CUDA)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/gpu-results}"
mkdir -p "$out"
strata="$root/strata"
backend=cuda
[ -n "${STRATA_GPU_DRY:-}" ] && backend=cpu
synth_size="${STRATA_GPU_SYNTH_SIZE:-2GB}"
tokens="${STRATA_GPU_TOKENS:-64}"
step_timeout="${STRATA_GPU_STEP_TIMEOUT:-900}"
failed=()

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# step NAME CMD…: stdout to OUT/NAME.json, stderr to OUT/NAME.log, seconds kept for the summary
declare -A took
step() {
  local name="$1"
  shift
  local t0
  t0=$(now_ms)
  echo "cuda-lanes: $name …" >&2
  if ! timeout "$step_timeout" "$@" >"$out/$name.json" 2>"$out/$name.log"; then
    failed+=("$name")
    echo "cuda-lanes: $name failed; its log ends:" >&2
    tail -n 15 "$out/$name.log" >&2
  fi
  took[$name]=$(($(now_ms) - t0))
}

{
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader
  command -v nvcc >/dev/null && nvcc --version | tail -n 2
  nproc
} >"$out/machine.txt" 2>&1

# the tokenizer and the whole-model comparisons load the CPU library as well
step build-cpu "$strata" build --backend cpu
step "build-$backend" "$strata" build --backend "$backend"
step "parity-$backend" "$strata" parity --backend "native-$backend" --json
step "route2-$backend" "$strata" bench route --backend "$backend" --tokens "$tokens" --json

synth="${TMPDIR:-/tmp}/strata-gpu-synth-$synth_size.gguf"
step synth "$strata" model synth --arch llama --size "$synth_size" --layers 32 --out "$synth"
step "synth-route2-$backend" "$strata" bench route --backend "$backend" --model "$synth" --split 0:16,16:32 \
  --tokens "$tokens" --json
step "route3-$backend" "$strata" bench route --backend "$backend" --split 0:10,10:20,20:30 --tokens "$tokens" --json
step "synth-parity-$backend" "$strata" parity --backend "native-$backend" --model "$synth" --split 0:16,16:32 \
  --json

# one summary: each step's milliseconds and whether it passed, beside the JSON the steps printed
{
  echo "{"
  echo "  \"backend\": \"$backend\","
  echo "  \"machine\": $(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' "$out/machine.txt"),"
  echo "  \"failed\": [$([ ${#failed[@]} -gt 0 ] && printf '"%s",' "${failed[@]}" | sed 's/,$//')],"
  echo "  \"ms\": {"
  first=1
  for k in "${!took[@]}"; do
    [ $first = 1 ] || echo ","
    first=0
    printf '    "%s": %d' "$k" "${took[$k]}"
  done
  echo
  echo "  }"
  echo "}"
} >"$out/cuda-lanes.json"
cat "$out/cuda-lanes.json"
[ ${#failed[@]} -eq 0 ]
