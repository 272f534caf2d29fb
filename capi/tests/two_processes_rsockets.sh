#!/usr/bin/env bash
# rsockets across two processes (sourced by run.sh after two_processes.sh): rdma-core's
# rstream and riostream (rdmacm-utils) on the shim's librdmacm.so.1, the server at
# 127.0.45.1 and the client at 127.0.45.2, each with one device and no VFIO function. Each
# run checks that both sides exit 0 and print their result lines; `-T v` makes both sides
# check every byte they receive (rstream's verify_buf; riostream's on the mapped buffer).

rs_profile=$bin/rsockets-profile.toml
sed '/^vfio_pci_name/d' sim/profiles/cx6dx.toml > "$rs_profile"
rs_env="MLX5SIM_PROFILE=$rs_profile MLX5SIM_DEVICES=1"
rs_port=$((21000 + RANDOM % 20000))

# rs_pair NAME TIMEOUT PROGRAM ARGS...: the server (PROGRAM ARGS at 127.0.45.1), then the
# client (PROGRAM -s 127.0.45.1 ARGS at 127.0.45.2), on a port of their own; sets rc_s, rc_c.
rs_pair() {
  local name=$1 limit=$2 prog=$3
  shift 3
  rs_port=$((rs_port + 1))
  env $rs_env MLX5SIM_ADDR=127.0.45.1 LD_LIBRARY_PATH=$shim timeout "$limit" stdbuf -oL \
    "$prog" -p "$rs_port" "$@" > "$bin/$name-server.log" 2>&1 &
  local server=$!
  sleep 1
  env $rs_env MLX5SIM_ADDR=127.0.45.2 LD_LIBRARY_PATH=$shim timeout "$limit" stdbuf -oL \
    "$prog" -s 127.0.45.1 -p "$rs_port" "$@" > "$bin/$name-client.log" 2>&1
  rc_c=$?
  wait "$server"
  rc_s=$?
}

# rs_check NAME LINES WHAT: both sides exited 0 and each printed LINES result lines (a
# name, a size and a Gb/sec figure each) and no error.
rs_check() {
  local name=$1 lines=$2 what=$3 s c
  s=$(grep -cE '^[0-9a-z_]+ +[0-9.]+[kmg]? +[0-9]' "$bin/$name-server.log")
  c=$(grep -cE '^[0-9a-z_]+ +[0-9.]+[kmg]? +[0-9]' "$bin/$name-client.log")
  if [ "$rc_s" = 0 ] && [ "$rc_c" = 0 ] && [ "$s" = "$lines" ] && [ "$c" = "$lines" ] \
     && ! grep -qiE 'mismatch|error|fail' "$bin/$name-server.log" "$bin/$name-client.log"; then
    pass "$what: both exit 0, $lines result line(s) each ($(tail -n 1 "$bin/$name-client.log" | tr -s ' '))"
  else
    fail "$what: exits $rc_s/$rc_c, $s/$c result lines: $(tail -n 2 "$bin/$name-server.log" "$bin/$name-client.log" | tr '\n' ' ')"
  fi
}

echo "rsockets across two processes (hosts 127.0.45.1 and 127.0.45.2)"
for size in 1 4095 65536 1000000; do
  rs_pair "rstream-$size" 60 rstream -C 20 -S "$size" -T v
  rs_check "rstream-$size" 1 "rstream -C 20 -S $size -T v (non-blocking, the default)"
done
rs_pair rstream-block 60 rstream -C 200 -S 10000 -T b -T v
rs_check rstream-block 1 "rstream -T b -T v (blocking calls, MSG_WAITALL)"
rs_pair rstream-async 60 rstream -C 200 -S 10000 -T a -T v
rs_check rstream-async 1 "rstream -T a -T v (rpoll before each call)"
rs_pair rstream-iter 60 rstream -I 5 -C 20 -S 70000 -T v
rs_check rstream-iter 1 "rstream -I 5 -C 20 -S 70000 -T v"
rs_pair rstream-resolve 60 rstream -C 50 -S 3000 -T r -T v
rs_check rstream-resolve 1 "rstream -T r -T v (rdma_getaddrinfo, the route given with RDMA_ROUTE)"
rs_pair rstream-keepalive 60 rstream -C 50 -S 3000 -k 10 -T v
rs_check rstream-keepalive 1 "rstream -k 10 -T v (SO_KEEPALIVE and TCP_KEEPIDLE)"
if ! grep -q "Keepalive: ON" "$bin/rstream-keepalive-server.log" || ! grep -q "time: 10" "$bin/rstream-keepalive-client.log"; then
  fail "rstream -k 10: rgetsockopt does not give back SO_KEEPALIVE on and TCP_KEEPIDLE 10"
fi
# The default run: the latency then the bandwidth tests of 64 B to 1 MiB, on two
# connections one after the other (rclose, then a second raccept and rconnect).
rs_pair rstream-default 300 rstream
rs_check rstream-default 8 "rstream with no options (4 latency and 4 bandwidth sizes, two connections)"
if [ "$(grep -c '_bw ' "$bin/rstream-default-client.log")" != 4 ]; then
  fail "rstream's default run: $(grep -c '_bw ' "$bin/rstream-default-client.log") bandwidth lines, not 4"
fi

rs_pair riostream-small 60 riostream -C 50 -S 1000 -T v
rs_check riostream-small 1 "riostream -C 50 -S 1000 -T v (riowrite into the peer's riomap)"
rs_pair riostream-large 60 riostream -C 10 -S 1000000 -T v
rs_check riostream-large 1 "riostream -C 10 -S 1000000 -T v"
# A latency run: each side waits on the last byte of its mapped buffer, with no call (the
# device thread writes it); rstream's default run of 100,000 of these is too long here.
rs_pair riostream-lat 60 riostream -I 200 -C 1 -S 64 -T v
rs_check riostream-lat 1 "riostream -I 200 -C 1 -S 64 -T v (latency: each side spins on its buffer)"
rs_pair riostream-block 60 riostream -I 3 -C 20 -S 5000 -T b -T v
rs_check riostream-block 1 "riostream -I 3 -C 20 -S 5000 -T b -T v (blocking)"

# A port nobody listens on at a host that has a listener: the peer's CM rejects the REQ
# and rconnect fails with ECONNREFUSED.
rs_port=$((rs_port + 1))
env $rs_env MLX5SIM_ADDR=127.0.45.1 LD_LIBRARY_PATH=$shim timeout 20 rstream -p "$rs_port" -C 1 -S 10 \
  > "$bin/rstream-refused-server.log" 2>&1 &
rs_server=$!
sleep 1
out=$(env $rs_env MLX5SIM_ADDR=127.0.45.2 LD_LIBRARY_PATH=$shim timeout 20 \
  rstream -s 127.0.45.1 -p "$((rs_port + 1))" -C 1 -S 10 -T b 2>&1)
rc=$?
kill "$rs_server" 2> /dev/null
wait "$rs_server" 2> /dev/null
if [ $rc != 0 ] && [ $rc != 124 ] && echo "$out" | grep -q "rconnect: Connection refused"; then
  pass "rstream -s to a port no one listens on: 'rconnect: Connection refused', exit $rc"
else
  fail "rstream to no listener: exit $rc: $(echo "$out" | tr '\n' ' ')"
fi

# Datagram rsockets: rdma-core's udpong (rdmacm-utils), the server bound to 127.0.45.1 with
# -b (without it udpong binds the loopback address of no simulated port). The server loops
# for ever by design, so it is stopped once the client is done; it must have printed the
# client's login. The client's result line says how many datagrams the server counted
# (bandwidth runs) or twice the count (echo runs, -T e): exact figures, as nothing is lost
# below the server's 384 posted receives.
# ud_pair NAME CLIENT-ARGS... [-- SERVER-ARGS...]: sets rc_c and the two logs (and the
# client's capture in $ud_pcap when that is set).
ud_pair() {
  local name=$1 cargs=() sargs=()
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do cargs+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  sargs=("$@")
  rs_port=$((rs_port + 1))
  env $rs_env MLX5SIM_ADDR=127.0.45.1 LD_LIBRARY_PATH=$shim timeout 90 stdbuf -oL \
    udpong -b 127.0.45.1 -p "$rs_port" "${sargs[@]}" > "$bin/$name-server.log" 2>&1 &
  local server=$!
  sleep 1
  env $rs_env ${ud_pcap:+MLX5SIM_PCAP=$ud_pcap} MLX5SIM_ADDR=127.0.45.2 LD_LIBRARY_PATH=$shim timeout 60 stdbuf -oL \
    udpong -s 127.0.45.1 -p "$rs_port" "${cargs[@]}" > "$bin/$name-client.log" 2>&1
  rc_c=$?
  sleep 0.2
  kill "$server" 2> /dev/null
  wait "$server" 2> /dev/null
}

# ud_check NAME XFERS WHAT: the client exited 0 and printed one result line with XFERS
# transfers, the server the client's login.
ud_check() {
  local name=$1 xfers=$2 what=$3 line
  line=$(grep -E '^custom +[0-9.]+[kmg]? +[0-9]' "$bin/$name-client.log")
  if [ "$rc_c" = 0 ] && [ "$(echo "$line" | awk '{print $3}')" = "$xfers" ] \
     && grep -q "client login from 127.0.45.2" "$bin/$name-server.log" \
     && ! grep -qiE 'error|fail|rsend|rrecv' "$bin/$name-client.log" "$bin/$name-server.log"; then
    pass "$what: exit 0, $xfers transfers ($(echo "$line" | tr -s ' '))"
  else
    fail "$what: exit $rc_c, result '$line': $(tail -n 2 "$bin/$name-server.log" "$bin/$name-client.log" | tr '\n' ' ')"
  fi
}

echo "datagram rsockets across two processes (udpong)"
ud_pcap=$bin/udpong-client.pcap
rm -f "$ud_pcap"
ud_pair udpong-bw -C 200 -S 1000
ud_pcap=
ud_check udpong-bw 200 "udpong -C 200 -S 1000 (bandwidth, non-blocking)"
# The datagrams travel as UD SENDs between the hosts' simulated ports: the client's capture
# holds the 200 of 1008 bytes (the 8-byte address header, then udpong's 1000: UDP length 1040
# with the BTH, DETH and ICRC).
if ! command -v tshark > /dev/null; then
  echo "  skip: tshark is not on PATH (udpong's capture)"
else
  n=$(tshark -r "$bin/udpong-client.pcap" -Y 'ip.src == 127.0.45.2 && ip.dst == 127.0.45.1 && udp.length == 1040' 2>/dev/null \
    | grep -c 'UD Send Only')
  if [ "$n" = 200 ]; then
    pass "udpong's capture: 200 UD SENDs of 1008 bytes from 127.0.45.2 to 127.0.45.1"
  else
    fail "udpong's capture: $n UD SENDs of 1008 bytes from 127.0.45.2 to 127.0.45.1, not 200"
  fi
fi
ud_pair udpong-echo -C 200 -S 64 -T e
ud_check udpong-echo 400 "udpong -C 200 -S 64 -T e (echo, non-blocking)"
ud_pair udpong-block -C 200 -S 1536 -T e -T b -- -T b
ud_check udpong-block 400 "udpong -C 200 -S 1536 -T e -T b (echo, blocking calls on both sides)"
ud_pair udpong-async -C 100 -S 2040 -T a -- -T a
ud_check udpong-async 100 "udpong -C 100 -S 2040 -T a (the largest datagram; rpoll before each call)"
# One byte past what a datagram carries: the client's rsend fails with EMSGSIZE (rsocket.c
# would write past its 2048-byte send slot) and prints no result; udpong still exits 0.
ud_pair udpong-big -C 10 -S 2041
if [ "$rc_c" = 0 ] && grep -q "rsend: Message too long" "$bin/udpong-big-client.log" \
   && ! grep -qE '^custom ' "$bin/udpong-big-client.log"; then
  pass "udpong -S 2041: 'rsend: Message too long', no result, exit 0"
else
  fail "udpong -S 2041: exit $rc_c: $(tr '\n' ' ' < "$bin/udpong-big-client.log")"
fi
