#!/usr/bin/env bash
# Run fuzz targets one after another, each for RUNS executions or SECONDS seconds, whichever
# comes first, from the committed corpus (new inputs go to a scratch folder that is removed),
# and print one row of docs/fuzzing.md's table per target.
#
#   bash fuzz/figures.sh [RUNS] [SECONDS] [TARGET...]      (make fuzz-figures)
#
# One libFuzzer process at a time, on one core; libFuzzer's own limits (2048 MB of RSS,
# 1200 s for one input). A crash, a leak, a timeout or an out-of-memory stops the target:
# its row says which and where libFuzzer wrote the input (fuzz/artifacts/<target>/), and the
# script exits 1 after the remaining targets.
#
# FUZZ_SANITIZER=none builds without AddressSanitizer (cargo fuzz's `-s`; default `address`):
# about a quarter of each execution is ASan's in these safe-Rust bodies, so long runs that
# are after an execution count use it; the table's row says which was used.
set -u
runs=${1:-10000000}
sanitizer=${FUZZ_SANITIZER:-address}
seconds=${2:-1800}
shift 2 2>/dev/null || shift $#
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(calls mailbox profile_toml trace_replay datagram net_rx)

here=$(cd "$(dirname "$0")" && pwd)
cd "$here" || exit 2
failed=0
echo "| target | executions | exec/s | time | coverage (cov / ft) | corpus | result | command |"
echo "|---|---|---|---|---|---|---|---|"
for t in "${targets[@]}"; do
  # Built first, so that the time is the fuzzing's alone.
  cargo +nightly fuzz build -s "$sanitizer" "$t" >/dev/null 2>&1 || { echo "$t: cargo fuzz build failed" >&2; exit 2; }
  # FUZZ_SCRATCH=DIR keeps the new inputs in DIR/<target> (to minimise into the corpus).
  scratch=${FUZZ_SCRATCH:+$FUZZ_SCRATCH/$t}
  scratch=${scratch:-$(mktemp -d)}
  mkdir -p "$scratch"
  log=$(mktemp)
  start=$(date +%s)
  cargo +nightly fuzz run -s "$sanitizer" "$t" "$scratch" "corpus/$t" -- \
    -runs="$runs" -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1
  status=$?
  elapsed=$(( $(date +%s) - start ))
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  execs=$(stat number_of_executed_units)
  rate=$(stat average_exec_per_sec)
  # The last status line: "#N  ...  cov: C ft: F corp: U/S ..."
  last=$(grep -E '^#[0-9]+' "$log" | grep ' cov: ' | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  if [ "$status" -eq 0 ]; then
    result="no crash"
  else
    failed=1
    kind=$(grep -oE 'ERROR: libFuzzer: [a-z-]+|panicked at [^ ]+|ERROR: AddressSanitizer: [a-z-]+' "$log" | head -1)
    input=$(sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$log" | tail -1)
    result="FAILED: ${kind:-exit $status} ${input:+(${input#"$here"/})}"
    mkdir -p "artifacts/$t" && cp "$log" "artifacts/$t/fuzz.log"
  fi
  cmd="make fuzz-figures FUZZ_TARGETS=$t FUZZ_RUNS=$runs FUZZ_SECONDS=$seconds"
  [ "$sanitizer" = address ] || cmd="$cmd FUZZ_SANITIZER=$sanitizer"
  echo "| $t | ${execs:-?} | ${rate:-?} | ${elapsed} s | ${cov:-?} / ${ft:-?} | ${corp:-?} | $result | \`$cmd\` |"
  [ -n "${FUZZ_SCRATCH:-}" ] || rm -rf "$scratch"
  rm -f "$log"
done
exit $failed
