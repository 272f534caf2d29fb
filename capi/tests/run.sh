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

echo "the shim links no test harness: nothing of the suite among mlx5-capi's dependencies"
# The recorder comes from mlx5-trace; the suite, its CLI and report crates, and the test
# frameworks are never what a program on the shim loads.
harness="mlx5-conformance clap quick-junit libtest-mimic proptest proptest-state-machine quick-xml textwrap
         chrono gethostname wait-timeout insta rstest criterion"
if tree=$(${CARGO:-cargo} tree -p mlx5-capi -e normal --prefix none 2>&1); then
  found=$(for d in $harness; do echo "$tree" | awk -v d="$d" '$1 == d {print d; exit}'; done)
  if [ -z "$found" ]; then
    pass "mlx5-capi depends on $(echo "$tree" | awk 'NR > 1 {print $1}' | sort -u | wc -l) crates, none of: $(echo $harness)"
  else
    fail "mlx5-capi depends on $(echo $found) (cargo tree -p mlx5-capi -e normal -i <crate> shows through what)"
  fi
else
  fail "cargo tree -p mlx5-capi: $tree"
fi

echo "ABI: every symbol and version the installed libraries export"
exports() { nm -D --defined-only --with-symbol-versions "$1" | awk '$2 != "A" {print $3}' | sort; }
for lib in libibverbs.so.1 libmlx5.so.1 librdmacm.so.1; do
  missing=$(comm -23 <(exports "$libdir/$lib") <(exports "$shim/$lib"))
  listed=$(grep -v '^#' "capi/abi/${lib%.so.1}.symbols" | sed 's/^\([^@]*\)@@/\1@@/' | sort)
  unlisted=$(comm -23 <(echo "$listed") <(exports "$shim/$lib"))
  if [ -z "$missing" ] && [ -z "$unlisted" ]; then
    pass "$lib exports the $(exports "$libdir/$lib" | wc -l) symbols of $libdir/$lib and every later release's"
  else
    fail "$lib lacks: $(echo $missing $unlisted)"
  fi
done

echo "ABI: each exported call's failure convention (capi/abi/prototypes.tsv), and every stub's"
if out=$(/usr/bin/python3 capi/tests/abi_stubs.py "$shim" "target/$build/libmlx5_capi.a" 2>&1); then
  pass "$out"
else
  fail "stubs: $out"
fi

echo "C programs (capi/tests/*.c), built against the installed headers"
for src in capi/tests/*.c; do
  name=$(basename "$src" .c)
  if ! cc -Wall -Werror -O1 "$src" -o "$bin/$name" -libverbs -lmlx5 -lrdmacm -lpthread; then
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
            "link_layer:		Ethernet" "RoCE v2" "atomic_cap:			ATOMIC_HCA (1)" "ODP_SUPPORT_IMPLICIT"; do
  if echo "$out" | grep -qF "$want"; then pass "ibv_devinfo -v shows '$want'"; else fail "ibv_devinfo -v lacks '$want'"; fi
done

out=$(under_shim ibv_devinfo -v 2>&1)
if echo "$out" | grep -qw "XRC"; then pass "ibv_devinfo -v advertises XRC"; else fail "ibv_devinfo -v lacks XRC in the device caps"; fi
# Memory windows are simulated: mlx5_ib's two flags, with imaicl (every shipped profile).
for wanted in "MEM_WINDOW" "MEM_WINDOW_TYPE_2B"; do
  if echo "$out" | grep -qw "$wanted"; then pass "ibv_devinfo -v advertises $wanted"; else fail "ibv_devinfo -v lacks $wanted"; fi
done

source capi/tests/two_processes.sh
source capi/tests/two_processes_rsockets.sh
source capi/tests/two_processes_cm_ud.sh
source capi/tests/two_processes_odp.sh
source capi/tests/two_processes_xrc.sh
source capi/tests/two_processes_uc_ud.sh
source capi/tests/two_processes_srq.sh
source capi/tests/two_processes_atomics.sh
source capi/tests/two_processes_rdmacm.sh
source capi/tests/two_processes_dc.sh
source capi/tests/two_processes_dc_atomics.sh
source capi/tests/two_processes_dc_resend.sh
source capi/tests/two_processes_cq128.sh
source capi/tests/two_processes_ucx_libfabric.sh

echo "other programs no one here wrote: a message, never a signal"
# rping to a port no one listens on (its own simulated port's address, 127.0.68.1): the
# connection is rejected, and rping says so. (An address the host does not have is
# capi/tests/rdmacm.c's, found at run time: EADDRNOTAVAIL or ENODEV, no socket bound to it.)
for prog in "rping -c -a 127.0.68.1 -p 7999 -C 1"; do
  out=$(MLX5SIM_ADDR=127.0.68.1 under_shim timeout 10 $prog 2>&1)
  rc=$?
  # 124: the timeout's; 128 + n: signal n (rping's -1 is 255, an exit of its own).
  if [ $rc -ge 124 ] && [ $rc -le 192 ]; then fail "$prog: exit $rc (a signal or a hang): $out"
  elif [ $rc = 0 ] || [ -z "$out" ]; then fail "$prog: exit $rc without a message: $out"
  else pass "$prog exits $rc with: $(echo "$out" | head -1)"; fi
done
out=$(under_shim timeout 10 fi_info -p verbs 2>&1)
rc=$?
if [ $rc = 0 ] && echo "$out" | grep -q "domain: mlx5_0"; then pass "fi_info -p verbs lists mlx5_0"; else fail "fi_info -p verbs: exit $rc: $(echo "$out" | head -3)"; fi
# Here UCX lists no IB transport (it looks for the device's node under /dev/infiniband, which
# two_processes_ucx_libfabric.sh provides), but it loads its IB module against the shim and
# must come through.
out=$(under_shim timeout 10 ucx_info -d 2>&1)
rc=$?
if [ $rc = 0 ]; then pass "ucx_info -d exits 0"; else fail "ucx_info -d: exit $rc: $(echo "$out" | tail -3)"; fi

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

echo "a capture of the simulated fabric (MLX5SIM_PCAP)"
rm -f "$bin/loopback.pcap"
MLX5SIM_PCAP=$bin/loopback.pcap under_shim "$bin/loopback" > /dev/null 2>&1
if ! command -v tshark > /dev/null; then
  echo "  skip: tshark is not on PATH"
elif n=$(tshark -r "$bin/loopback.pcap" --disable-protocol rpcordma -T fields -e _ws.col.Protocol 2>&1 | grep -c '^RRoCE$') \
   && [ "$n" -gt 0 ]; then
  pass "loopback under MLX5SIM_PCAP: tshark reads $n RRoCE packets"
else
  fail "loopback under MLX5SIM_PCAP: no RRoCE packet in $bin/loopback.pcap"
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

echo "qualify over the shim, and its bundle replayed on the simulator"
# Each process on the shim is a host of its own, with GIDs of its own; a card is one host.
# The cases left out differ for reasons a trace cannot carry yet (docs/user-guide.md,
# "What replay-bundle cannot compare yet"): QP numbers symbolized by value on two devices,
# addresses inside WQE bytes, object ids inside DEVX output bytes, a UAR the hw backend hands
# out anew, a CQE read from memory or a QP state read before the card wrote it, reserved QP
# numbers (the firmware places them where no QP is; the card's probes made QPs first), a raw
# WQE's bytes (its SGE's key and address are the card's run's).
differs="atomics.fetch_add_two_devices_and_wraps traffic.write_read_send_two_devices
  device_objects.reserved_qpn_forward_and_einval
  odp.implicit_mr_reaches_any_buffer odp.send_write_read_atomic_both_sides_odp
  wqe.mkey_configure_list_bytes wqe.rdma_write_after_umr_bytes wr.raw_wqe_runs_as_written
  dc.stream_errors_stay_in_their_stream
  devx.raw_cq_and_qp_by_their_objects
  devx.nc_uar_is_the_context_singleton devx.completion_eqe_after_raw_qp_traffic
  devx.qp_error_eqe_after_a_bad_rkey traffic.reset_removes_unpolled_completions
  cq_ring.entries_of_128_bytes_hold_the_cqe64_last cq_ring.resize_and_cleanup_keep_128_byte_entries
  cq_ring.devx_cq_of_128_byte_entries_and_oi"
exclude=$(for c in $differs; do printf -- '--exclude %s ' "$c"; done)
rm -rf "$bin/bundle"
if [ -x "$cli" ] && MLX5SIM_HOST=0 MLX5SIM_NET=off under_shim timeout 300 "$cli" qualify --vfio-device 0000:08:00.0 \
     $exclude --output "$bin/bundle" > "$bin/qualify.txt" 2>&1; then
  missing=$(for f in report.json report.xml report.html profile.toml versions.toml; do
    [ -s "$bin/bundle/$f" ] || echo "$f"; done)
  traces=$(ls "$bin/bundle/traces" | wc -l)
  versions=$(grep -c -e '^fw_ver = "22' -e '^kernel = "' -e '^rdma_core_package = "libibverbs1 ' \
    -e '^libmlx5 = ".*/target/shim/libmlx5.so.1"' "$bin/bundle/versions.toml")
  if [ -z "$missing" ] && [ "$traces" -gt 100 ] && [ "$versions" = 4 ]; then
    pass "qualify: $(tail -1 "$bin/qualify.txt" | sed 's/^mlx5-conformance: //')"
  else
    fail "qualify's bundle lacks: $missing (traces: $traces; versions: $(tr '\n' ' ' < "$bin/bundle/versions.toml"))"
  fi
  out=$(MLX5SIM_HOST=0 MLX5SIM_NET=off under_shim timeout 60 "$cli" qualify --output "$bin/bundle" 2>&1)
  rc=$?
  if [ $rc = 2 ] && echo "$out" | grep -q "exists and is not empty"; then
    pass "qualify into an existing bundle: exit 2, $(echo "$out" | sed 's/^mlx5-conformance: //')"
  else
    fail "qualify into an existing bundle: exit $rc: $out"
  fi
  if timeout 300 "$cli" replay-bundle "$bin/bundle" > "$bin/replay-bundle.txt" 2>&1; then
    pass "replay-bundle: $(tail -1 "$bin/replay-bundle.txt")"
  else
    fail "replay-bundle: $(head -20 "$bin/replay-bundle.txt"; tail -1 "$bin/replay-bundle.txt")"
  fi
else
  fail "qualify over the shim: $(tail -5 "$bin/qualify.txt" 2>/dev/null)"
fi

echo "discover over the shim, and its shrunk trace replayed on the card"
# The model's random sequences on the hw backend (the shim as the card): a disagreement is
# shrunk and written as a trace, which a fresh process replays on the same card call for call.
rm -f "$bin/discover.jsonl"
MLX5SIM_HOST=0 MLX5SIM_NET=off under_shim timeout 600 "$cli" discover --backend hw --cases 16 --len 30 \
  --output "$bin/discover.jsonl" > "$bin/discover.txt" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "the backend agrees with the model" "$bin/discover.txt"; then
  pass "discover --backend hw: $(tail -1 "$bin/discover.txt")"
elif [ $rc = 1 ] && [ -s "$bin/discover.jsonl" ] \
     && MLX5SIM_HOST=0 MLX5SIM_NET=off under_shim timeout 300 "$cli" replay "$bin/discover.jsonl" --backend hw \
        > "$bin/discover-replay.txt" 2>&1 \
     && grep -q "every call matches" "$bin/discover-replay.txt"; then
  pass "discover --backend hw finds a disagreement, $(grep -o '^shrunk to [0-9]* ops' "$bin/discover.txt"), written as a trace of $(wc -l < "$bin/discover.jsonl") lines that replays on the card in a new process with every call matching: $(grep -B1 '^shrunk' "$bin/discover.txt" | head -1 | cut -c1-200)"
else
  fail "discover --backend hw: exit $rc: $(tail -3 "$bin/discover.txt"; tail -3 "$bin/discover-replay.txt" 2>/dev/null)"
fi

if [ $failures != 0 ]; then echo "$failures shim test(s) failed"; exit 1; fi
echo "all shim tests passed"
