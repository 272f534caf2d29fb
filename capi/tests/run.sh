#!/usr/bin/env bash
# The shim's tests (`make test-shim`): the exported ABI against the installed rdma-core, the C
# programs of this directory, ibverbs-utils, pyverbs, and the suite's hw backend, each on the
# simulated NIC behind target/shim.
#   capi/tests/run.sh [debug|release]     (the build of libmlx5_capi.a to link; default debug)
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-debug}
shim=target/shim
bin=$shim/tests
failures=0
pass() { printf '  ok    %s\n' "$1"; }
fail() { printf '  FAIL  %s\n' "$1"; failures=$((failures + 1)); }
# Where the installed rdma-core's libraries are, as the linker finds them.
libdir=$(dirname "$(readlink -f "$(cc -print-file-name=libibverbs.so.1)")")
under_shim() { LD_LIBRARY_PATH=$shim "$@"; }

bash capi/abi/link.sh "$build" || { echo "linking the shim failed"; exit 1; }
mkdir -p "$bin"

echo "ABI: every symbol and version the installed libraries export"
exports() { nm -D --defined-only --with-symbol-versions "$1" | awk '$2 != "A" {print $3}' | sort; }
for lib in libibverbs.so.1 libmlx5.so.1; do
  missing=$(comm -23 <(exports "$libdir/$lib") <(exports "$shim/$lib"))
  listed=$(grep -v '^#' "capi/abi/${lib%.so.1}.symbols" | sed 's/^\([^@]*\)@@/\1@@/' | sort)
  unlisted=$(comm -23 <(echo "$listed") <(exports "$shim/$lib"))
  if [ -z "$missing" ] && [ -z "$unlisted" ]; then
    pass "$lib exports the $(exports "$libdir/$lib" | wc -l) symbols of $libdir/$lib and every later release's"
  else
    fail "$lib lacks: $(echo $missing $unlisted)"
  fi
done

echo "C programs (capi/tests/*.c), built against the installed headers"
for src in capi/tests/*.c; do
  name=$(basename "$src" .c)
  if ! cc -Wall -Werror -O1 "$src" -o "$bin/$name" -libverbs -lmlx5 -lpthread; then
    fail "$name does not build"
    continue
  fi
  # Without the shim on a host without a card, the same program skips.
  "$bin/$name" > "$bin/$name.real.log" 2>&1
  rc=$?
  if [ $rc = 77 ] || [ $rc = 0 ]; then pass "$name on the real libraries: exit $rc"; else fail "$name on the real libraries: exit $rc ($(tail -1 "$bin/$name.real.log"))"; fi
  for profile in cx6dx cx6dx-no-update-tag cx7; do
    MLX5SIM_PROFILE=$profile under_shim timeout 120 "$bin/$name" > "$bin/$name.$profile.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then pass "$name on $profile"; else fail "$name on $profile: exit $rc: $(tail -2 "$bin/$name.$profile.log" | tr '\n' ' ')"; fi
  done
done

echo "ibverbs-utils"
out=$(under_shim ibv_devices 2>&1)
if echo "$out" | grep -q "mlx5_0" && echo "$out" | grep -q "mlx5_1"; then pass "ibv_devices lists mlx5_0 and mlx5_1"; else fail "ibv_devices: $out"; fi
out=$(under_shim ibv_devinfo -v 2>&1)
for want in "hca_id:	mlx5_0" "vendor_id:			0x02c9" "board_id:			SIM_CX6DX" "state:			PORT_ACTIVE (4)" \
            "link_layer:		Ethernet" "RoCE v2"; do
  if echo "$out" | grep -qF "$want"; then pass "ibv_devinfo -v shows '$want'"; else fail "ibv_devinfo -v lacks '$want'"; fi
done

echo "pyverbs"
out=$(under_shim /usr/bin/python3 capi/tests/pyverbs_mkey.py 2>&1)
rc=$?
if [ $rc = 0 ]; then pass "$out"; else fail "pyverbs (exit $rc): $out"; fi

echo "traces recorded from a C program (MLX5SIM_TRACE)"
cli=target/$build/mlx5-conformance
MLX5SIM_TRACE=$bin/loopback.jsonl under_shim "$bin/loopback" > /dev/null 2>&1
if "$cli" replay "$bin/loopback.jsonl" --backend sim --profile cx6dx > "$bin/replay.txt" 2>&1; then
  pass "loopback's trace ($(wc -l < "$bin/loopback.jsonl") lines) replays on cx6dx with every call matching"
else
  fail "loopback's trace: $(tail -3 "$bin/replay.txt")"
fi
MLX5SIM_PROFILE=cx6dx-no-update-tag MLX5SIM_TRACE=$bin/mkey_sig.jsonl under_shim "$bin/mkey_sig" > /dev/null 2>&1
"$cli" replay "$bin/mkey_sig.jsonl" --backend sim --profile cx6dx > "$bin/replay.txt" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q '"call":"create_mkey"' "$bin/replay.txt" && grep -q '"errno":95' "$bin/replay.txt"; then
  pass "mkey_sig's trace from cx6dx-no-update-tag diverges on cx6dx at the UPDATE_TAG mkey (EOPNOTSUPP recorded)"
else
  fail "mkey_sig's trace on cx6dx: exit $rc: $(tail -4 "$bin/replay.txt")"
fi

echo "the suite's hw backend over the shim"
if [ -x "$cli" ]; then
  # The default profile's VFIO function (sim/profiles/cx6dx.toml), so the VFIO cases run too.
  if under_shim "$cli" run --backend hw --vfio-device 0000:08:00.0 --format table > "$bin/hw-suite.txt" 2>&1; then
    pass "mlx5-conformance run --backend hw: $(tail -1 "$bin/hw-suite.txt")"
  else
    fail "mlx5-conformance run --backend hw: $(grep -A2 '^   hw' "$bin/hw-suite.txt" | head -40; tail -1 "$bin/hw-suite.txt")"
  fi
else
  fail "$cli is missing (build it with --features hw)"
fi

if [ $failures != 0 ]; then echo "$failures shim test(s) failed"; exit 1; fi
echo "all shim tests passed"
