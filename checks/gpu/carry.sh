#!/usr/bin/env bash
# Carries what `strata` installs on first use (Deno, the npm runtime packages, the pinned
# llama.cpp tree, the default model) to a GPU machine that can reach no registry, in parts
# small enough for a transfer limit; checks/gpu/cuda-lanes.sh then runs there as on any checkout.
#
#   checks/gpu/carry.sh pack DIR [LIMIT_MB]   here: DIR/1, DIR/2, … each under LIMIT_MB (default 60)
#   checks/gpu/carry.sh unpack PART_DIR       there, once per part, in any order; the model is put
#                                             together and verified when its last piece arrives
# Decompression uses python3 (lzma, tarfile): a bare machine may lack xz.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${STRATA_CACHE:-$HOME/.cache/strata}"
model_file=SmolLM2-135M-Instruct.Q4_1.gguf

pack() {
  local dir="$1" limit_mb="${2:-60}"
  rm -rf "$dir" && mkdir -p "$dir/work"
  local deno
  deno="$(readlink -f "$root/node_modules/.bin/deno")"
  echo "carry: compressing Deno" >&2
  xz -T0 -6 -c "$deno" >"$dir/work/deno.xz"
  echo "carry: the runtime packages and the llama.cpp tree" >&2
  (cd "$root" && "$root/vendor/llama.cpp/materialize.sh" &&
    tar -cJf "$dir/work/runtime.tar.xz" \
      --exclude='node_modules/@deno' --exclude='node_modules/deno' --exclude='node_modules/.bin' \
      --exclude='node_modules/@bufbuild/buf*' --exclude='node_modules/typescript' \
      --exclude='node_modules/vitest' --exclude='node_modules/@vitest' --exclude='node_modules/vite' \
      --exclude='node_modules/rollup' --exclude='node_modules/@rollup' --exclude='node_modules/openai' \
      --exclude='node_modules/@types' \
      node_modules \
      vendor/llama.cpp/tree/{CMakeLists.txt,cmake,ggml,src,include,vendor,common,licenses,LICENSE,.strata-stamp})
  local model="$cache/models/$model_file"
  [ -f "$model" ] || "$root/strata" model fetch >&2
  sha256sum "$model" | cut -d' ' -f1 >"$dir/work/model.sha256"
  split -b 8m -d "$model" "$dir/work/model.part"
  # first fit, in the order written: each part stays under the limit
  local n=1 used=0 size
  mkdir -p "$dir/$n"
  for f in "$dir"/work/deno.xz "$dir"/work/runtime.tar.xz "$dir"/work/model.sha256 "$dir"/work/model.part*; do
    size=$(($(stat -c %s "$f") / 1048576 + 1))
    if [ $((used + size)) -gt "$limit_mb" ]; then
      n=$((n + 1)) used=0
      mkdir -p "$dir/$n"
    fi
    mv "$f" "$dir/$n/"
    used=$((used + size))
  done
  rmdir "$dir/work"
  du -sh "$dir"/*/ >&2
}

unpack() {
  local part="$1"
  for f in "$part"/*; do
    case "$(basename "$f")" in
    deno.xz)
      mkdir -p "$root/node_modules/.bin"
      python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' \
        "$f" "$root/node_modules/.bin/deno"
      chmod +x "$root/node_modules/.bin/deno"
      ;;
    runtime.tar.xz)
      python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' \
        "$f" "$root"
      ;;
    model.*) mkdir -p "$cache/models/incoming" && cp "$f" "$cache/models/incoming/" ;;
    esac
  done
  local in="$cache/models/incoming"
  if [ -f "$in/model.sha256" ]; then
    local want
    want="$(cat "$in/model.sha256")"
    cat "$in"/model.part* >"$in/whole"
    if [ "$(sha256sum "$in/whole" | cut -d' ' -f1)" = "$want" ]; then
      mv "$in/whole" "$cache/models/$model_file" && rm -rf "$in"
      echo "carry: $model_file verified" >&2
    else
      rm -f "$in/whole"
      echo "carry: the model is not complete yet" >&2
    fi
  fi
}

case "${1:-}" in
pack) pack "${2:?pack DIR}" "${3:-60}" ;;
unpack) unpack "${2:?unpack PART_DIR}" ;;
*)
  echo "usage: carry.sh pack DIR [LIMIT_MB] | unpack PART_DIR" >&2
  exit 2
  ;;
esac
