#!/usr/bin/env bash
# UC and UD QPs across two processes (sourced by run.sh after two_processes.sh, whose `pair`
# and `tshark_clean` it uses). Hosts 127.0.25.1/127.0.26.1 (UC) and 127.0.27.1/127.0.28.1
# (UD); every program under `timeout`. Loss is not tried here: ibv_uc_pingpong and
# ibv_ud_pingpong wait for their receive forever when a message is lost (on hardware too), so
# the conformance suite's uc_ud cases test it.

echo "UC and UD QPs across two processes"
port=$((20000 + RANDOM % 20000))
pair uc-pingpong "MLX5SIM_ADDR=127.0.25.1 MLX5SIM_PCAP=$bin/uc-pingpong-server.pcap" "MLX5SIM_ADDR=127.0.26.1" \
  ibv_uc_pingpong -d mlx5_0 -g 0 -c -n 100 -s 3000 -m 1024 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "100 iters" "$bin/uc-pingpong-client.log" &&
  grep -q "100 iters" "$bin/uc-pingpong-server.log"; then
  pass "ibv_uc_pingpong -c -s 3000 -m 1024 between 127.0.25.1 and 127.0.26.1: 100 iterations, the data checked"
else
  fail "ibv_uc_pingpong: exits $rc_s/$rc_c: $(cat "$bin/uc-pingpong-server.log" "$bin/uc-pingpong-client.log" | tr '\n' ' ')"
fi
# UC on the wire: its own opcodes (0x20-0x2b), three packets a message, and no ACK at all.
uc_ops=$(tshark -r "$bin/uc-pingpong-server.pcap" -T fields -e infiniband.bth.opcode 2> /dev/null | sort -n | uniq -c |
  awk '{printf "%s:%s ", $2, $1}')
if out=$(tshark_clean "$bin/uc-pingpong-server.pcap") && [ "$uc_ops" = "32:200 33:200 34:200 " ]; then
  pass "the UC capture: $out RRoCE packets, clean; opcode:count $uc_ops(UC SEND First/Middle/Last), no ACK"
else
  fail "the UC capture: $out; opcode:count $uc_ops"
fi

port=$((port + 1))
pair ud-pingpong "MLX5SIM_ADDR=127.0.27.1" "MLX5SIM_ADDR=127.0.28.1 MLX5SIM_PCAP=$bin/ud-pingpong-client.pcap" \
  ibv_ud_pingpong -d mlx5_0 -g 0 -c -n 100 -s 1000 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "100 iters" "$bin/ud-pingpong-client.log" &&
  grep -q "100 iters" "$bin/ud-pingpong-server.log"; then
  pass "ibv_ud_pingpong -g 0 -c -s 1000 between 127.0.27.1 and 127.0.28.1: 100 iterations, the data checked after the GRH"
else
  fail "ibv_ud_pingpong: exits $rc_s/$rc_c: $(cat "$bin/ud-pingpong-server.log" "$bin/ud-pingpong-client.log" | tr '\n' ' ')"
fi
# UD on the wire: SEND Only (100) with a DETH naming the Q_Key ibv_ud_pingpong sets and the
# sending QP, 100 each way.
ud=$(tshark -r "$bin/ud-pingpong-client.pcap" -T fields -e infiniband.bth.opcode -e infiniband.deth.q_key \
  -e infiniband.deth.srcqp 2> /dev/null | sort | uniq -c | awk '{printf "%s x (%s %s %s) ", $1, $2, $3, $4}')
if out=$(tshark_clean "$bin/ud-pingpong-client.pcap") && [ "$(echo "$ud" | grep -o '100 x (100 0x0000000011111111 0x' | wc -l)" = 2 ]; then
  pass "the UD capture: $out RRoCE packets, clean; (opcode Q_Key source QP): $ud"
else
  fail "the UD capture: $out; (opcode Q_Key source QP): $ud"
fi

for prog in "ib_send_bw -c UD" "ib_send_lat -c UD" "ib_send_bw -c UC" "ib_write_bw -c UC" "ib_write_lat -c UC"; do
  port=$((port + 1))
  case "$prog" in *UD) hosts="127.0.27.2 127.0.28.2" ;; *) hosts="127.0.25.2 127.0.26.2" ;; esac
  set -- $hosts
  pair perftest-uc-ud "MLX5SIM_ADDR=$1" "MLX5SIM_ADDR=$2" $prog -d mlx5_0 -n 200 -p "$port"
  result=$(grep -A1 '#bytes' "$bin/perftest-uc-ud-client.log" | tail -1 | tr -s ' \t' ' ')
  if [ $rc_c = 0 ] && [ $rc_s = 0 ] && [ -n "$result" ]; then
    pass "$prog: both exit 0; the client reports:$result"
  else
    fail "$prog: exits $rc_s/$rc_c: $(tail -4 "$bin/perftest-uc-ud-client.log" | tr '\n' ' ')"
  fi
done
