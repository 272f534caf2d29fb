#!/usr/bin/env bash
# Link target/shim/libibverbs.so.1, libmlx5.so.1 and librdmacm.so.1 from the Rust static
# library (`make shim`): libibverbs holds the simulator, libmlx5 and librdmacm jump into it.
#   capi/abi/link.sh [release|debug]
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=${1:-release}
archive=target/$profile/libmlx5_capi.a
out=target/shim
gen=$out/gen
mkdir -p "$gen"
python3 capi/abi/gen.py "$archive" "$gen"
cc -shared -fPIC -o "$out/libibverbs.so.1" -Wl,-soname,libibverbs.so.1 \
  -Wl,--version-script="$gen/libibverbs.map" "$gen/stubs.c" \
  -Wl,--whole-archive "$archive" -Wl,--no-whole-archive $(cat "$gen/defsyms") \
  -lgcc_s -lpthread -lm -ldl -lrt -lutil
cc -shared -fPIC -o "$out/libmlx5.so.1" -Wl,-soname,libmlx5.so.1 \
  -Wl,--version-script="$gen/libmlx5.map" "$gen/forward.S" "$out/libibverbs.so.1"
cc -shared -fPIC -o "$out/librdmacm.so.1" -Wl,-soname,librdmacm.so.1 \
  -Wl,--version-script="$gen/librdmacm.map" "$gen/forward_rdmacm.S" "$out/libibverbs.so.1"
ln -sf libibverbs.so.1 "$out/libibverbs.so"
ln -sf libmlx5.so.1 "$out/libmlx5.so"
ln -sf librdmacm.so.1 "$out/librdmacm.so"
