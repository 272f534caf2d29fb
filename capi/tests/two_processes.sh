#!/usr/bin/env bash
# Real programs across two processes on the simulated network (sourced by run.sh, which
# defines pass, fail, under_shim and $bin). Servers and clients are started here, bounded by
# timeouts; every address is in 127.0.0.0/8.

# Debian's tshark gives port 4791 to RPC-over-RDMA, and its InfiniBand dissector guesses a
# short payload's first bytes as an Ethertype: ib_write_lat's 2-byte payloads then decode as
# (malformed) CRTP. Both guesses are about the data the programs send, not the headers.
tshark_clean() { # capture file -> packets, or a failure message on stdout and status 1
  local n bad
  n=$(tshark -r "$1" --disable-protocol rpcordma --disable-protocol crtp 2> /dev/null | grep -c RRoCE)
  bad=$(tshark -r "$1" --disable-protocol rpcordma --disable-protocol crtp \
    -Y '_ws.malformed || _ws.expert.severity >= error' 2> /dev/null | wc -l)
  if [ "$n" -gt 0 ] && [ "$bad" = 0 ]; then echo "$n"; else echo "$n RRoCE packets, $bad malformed or in error"; return 1; fi
}

# pair NAME SERVER_ENV CLIENT_ENV PROGRAM ARGS...: run PROGRAM as a server and a client
# (which connects to 127.0.0.1), each with its environment; sets rc_s, rc_c.
pair() {
  local name=$1 senv=$2 cenv=$3
  shift 3
  env $senv LD_LIBRARY_PATH=$shim timeout 60 "$@" > "$bin/$name-server.log" 2>&1 &
  local server=$!
  sleep 1
  env $cenv LD_LIBRARY_PATH=$shim timeout 60 "$@" 127.0.0.1 > "$bin/$name-client.log" 2>&1
  rc_c=$?
  wait "$server"
  rc_s=$?
}

echo "ibv_rc_pingpong across two processes"
port=$((20000 + RANDOM % 20000))
pair pingpong "" "" ibv_rc_pingpong -d mlx5_0 -g 0 -c -n 200 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "200 iters" "$bin/pingpong-client.log" && grep -q "200 iters" "$bin/pingpong-server.log"; then
  pass "ibv_rc_pingpong -c -g 0, default addresses: 200 iterations, the data checked on both sides"
else
  fail "ibv_rc_pingpong: exits $rc_s/$rc_c: $(cat "$bin/pingpong-server.log" "$bin/pingpong-client.log" | tr '\n' ' ')"
fi
port=$((port + 1))
pair pingpong-hosts "MLX5SIM_ADDR=127.0.1.1 MLX5SIM_PCAP=$bin/pingpong-server.pcap" \
  "MLX5SIM_ADDR=127.0.2.1 MLX5SIM_PCAP=$bin/pingpong-client.pcap" ibv_rc_pingpong -d mlx5_0 -g 0 -c -n 50 -s 5000 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "GID fe80::7fff:fe00:101" "$bin/pingpong-hosts-client.log"; then
  pass "ibv_rc_pingpong -c between hosts 127.0.1.1 and 127.0.2.1, by their RoCE v1 link-local GIDs"
else
  fail "ibv_rc_pingpong between hosts: exits $rc_s/$rc_c: $(cat "$bin/pingpong-hosts-client.log" | tr '\n' ' ')"
fi
for side in server client; do
  if out=$(tshark_clean "$bin/pingpong-$side.pcap"); then
    pass "the $side's capture: tshark decodes $out RRoCE packets, none malformed or in error"
  else
    fail "the $side's capture: $out"
  fi
done

echo "a peer that dies"
# ib_write_bw keeps WRITEs on the wire for its duration: once the server is killed, the
# client's next WRITE must end in RETRY_EXC_ERR (status 12) after timeout x retry_cnt.
# (ibv_rc_pingpong is not used here: a client with no send outstanding waits for its
# receive forever, on hardware too.) Without `timeout` in between: the process killed is the
# server itself.
port=$((port + 1))
MLX5SIM_ADDR=127.0.3.1 LD_LIBRARY_PATH=$shim ib_write_bw -d mlx5_0 -D 30 -p "$port" > "$bin/dead-server.log" 2>&1 &
server=$!
sleep 1
MLX5SIM_ADDR=127.0.4.1 LD_LIBRARY_PATH=$shim timeout 60 ib_write_bw -d mlx5_0 -D 30 -p "$port" 127.0.0.1 \
  > "$bin/dead-client.log" 2>&1 &
client=$!
sleep 3
kill -9 "$server" 2> /dev/null
wait "$server" 2> /dev/null
wait "$client"
rc=$?
if [ $rc != 0 ] && [ $rc -lt 124 ] && grep -q "Failed status 12" "$bin/dead-client.log"; then
  pass "the survivor's WRITE ends in RETRY_EXC_ERR (status 12, exit $rc), no hang"
else
  fail "a dead peer: client exit $rc: $(head -3 "$bin/dead-client.log" | tr '\n' ' ')"
fi

echo "faults on the network (MLX5SIM_NET_FAULTS)"
port=$((port + 1))
# The SEND packets (FIRST, MIDDLE, LAST), not the ACKs: a lost ACK of the last message, its
# receiver already gone, ends the sender in RETRY_EXC_ERR on any fabric (ibv_rc_pingpong has no
# closing handshake); sim/tests/network.rs loses ACKs too.
lossy() { echo "drop,opcode=0,p=0.02,seed=$1;drop,opcode=1,p=0.02,seed=$(($1 + 10));drop,opcode=2,p=0.02,seed=$(($1 + 20))"; }
pair lossy "MLX5SIM_ADDR=127.0.5.1 MLX5SIM_NET_FAULTS=$(lossy 1)" \
  "MLX5SIM_ADDR=127.0.6.1 MLX5SIM_NET_FAULTS=$(lossy 2)" ibv_rc_pingpong -d mlx5_0 -g 0 -c -n 100 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "100 iters" "$bin/lossy-client.log" && grep -q "100 iters" "$bin/lossy-server.log"; then
  pass "ibv_rc_pingpong -c with 2% of each side's SEND packets dropped: 100 iterations, the data checked"
else
  fail "ibv_rc_pingpong with loss: exits $rc_s/$rc_c: $(cat "$bin/lossy-server.log" "$bin/lossy-client.log" | tr '\n' ' ')"
fi
out=$(MLX5SIM_NET_FAULTS="drop,colour=red" under_shim timeout 20 ibv_devices 2>&1)
if echo "$out" | grep -q "MLX5SIM_NET_FAULTS: rule 'drop,colour=red': unknown key 'colour'"; then
  pass "a bad MLX5SIM_NET_FAULTS is refused, naming the rule and what is wrong"
else
  fail "a bad MLX5SIM_NET_FAULTS: $out"
fi

echo "perftest across two processes (hosts 127.0.1.1 and 127.0.2.1)"
for prog in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat; do
  for opts in "" "-q 4"; do
    case "$prog $opts" in *lat*-q*) continue ;; esac
    port=$((port + 1))
    rm -f "$bin/perftest.pcap"
    packets="not read"
    pair perftest "MLX5SIM_ADDR=127.0.1.1" "MLX5SIM_ADDR=127.0.2.1 MLX5SIM_PCAP=$bin/perftest.pcap" \
      $prog -d mlx5_0 -n 200 -p "$port" $opts
    result=$(grep -A1 '#bytes' "$bin/perftest-client.log" | tail -1 | tr -s ' \t' ' ')
    if [ $rc_c = 0 ] && [ $rc_s = 0 ] && [ -n "$result" ] && packets=$(tshark_clean "$bin/perftest.pcap"); then
      pass "$prog $opts: both exit 0; the client reports:$result; its capture: $packets RRoCE packets, clean"
    else
      fail "$prog $opts: exits $rc_s/$rc_c: $(tail -4 "$bin/perftest-client.log" | tr '\n' ' ') capture: $packets"
    fi
  done
done
