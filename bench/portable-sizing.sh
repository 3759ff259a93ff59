#!/usr/bin/env bash
# Packs what `svc-gateway sizing` needs into one xz archive, to size a deployment on a machine that
# has no Node, Bun or Redis installed (a lent benchmark machine, a bare host): the compiled binary,
# this machine's redis-server and redis-cli, and the two libraries Debian's Redis links that a base
# system lacks (liblzf, libjemalloc; libatomic beside them). There:
#   tar xJf sizing.tar.xz && sizing/run.sh --masters 1,3 --replicas 1,2,4,8 --layout apart --offers 6
#   bash bench/portable-sizing.sh [out=dist/portable]   (after `npm run build`)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist/portable}"
binary=dist/svc-gateway
[ -x "$binary" ] || { echo "no $binary: run npm run build first" >&2; exit 1; }
for tool in redis-server redis-cli xz; do
  command -v "$tool" > /dev/null || { echo "$tool is not installed" >&2; exit 1; }
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/sizing/bin" "$stage/sizing/lib"
cp "$binary" "$(command -v redis-server)" "$(command -v redis-cli)" "$stage/sizing/bin/"
# The libraries as redis-server resolves them here, by name (the links' targets, copied as files).
ldd "$(command -v redis-server)" | awk '/liblzf|libjemalloc|libatomic/ { print $3 }' | while read -r lib; do
  cp -L "$lib" "$stage/sizing/lib/$(basename "$lib")"
done
cat > "$stage/sizing/run.sh" <<'RUN'
#!/usr/bin/env bash
# svc-gateway sizing with the packed redis-server and redis-cli first on PATH; arguments pass through.
here="$(cd "$(dirname "$0")" && pwd)"
export PATH="$here/bin:$PATH" LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$here/bin/svc-gateway" sizing "$@"
RUN
chmod +x "$stage/sizing/run.sh"
mkdir -p "$out"
tar -C "$stage" -cf - sizing | xz -T0 -6 > "$out/sizing.tar.xz"
echo "$out/sizing.tar.xz ($(du -h "$out/sizing.tar.xz" | cut -f1))"
