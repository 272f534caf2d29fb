#!/usr/bin/env bash
# UCX (ucx_perftest) and libfabric's verbs provider (fi_pingpong) across two processes
# (sourced by run.sh, whose `pass`, `fail` and `tshark_clean` it uses). Hosts 127.0.65.1
# (server; its other device addresses follow) and 127.0.65.5 (client), every program under
# `timeout`.
#
# Neither program finds a device from rdma-core alone, as on a card they do not: UCX opens
# /dev/infiniband/uverbsN (a character device) and reads the port's GID types and netdevs,
# the device's NUMA node and CPUs from sysfs; libfabric's verbs provider lists a device
# through the addresses of an interface that is not a loopback one. Each test therefore runs
# in a private mount and network namespace (root, `unshare -m -n`): a TAP interface sim0
# carries the addresses, a tmpfs over /sys/class gives mlx5_0 and mlx5_1 those files, and a
# tmpfs over /dev/infiniband the two nodes (/dev/null's numbers: nothing is read from them).

echo "UCX and libfabric across two processes"
ns_script=$bin/ucx-libfabric-ns.sh
cat > "$ns_script" << 'EOF'
set -e
ip link set lo up
ip tuntap add dev sim0 mode tap
ip link set sim0 up
for a in 1 2 3 4 5 6 7 8; do ip addr add 127.0.65.$a/24 dev sim0; done
real=$(mktemp -d)
mount --bind /sys/class "$real"
mount -t tmpfs mlx5sim /sys/class
for e in "$real"/*; do [ "$(basename "$e")" = infiniband ] || ln -s "$e" /sys/class/; done
for dev in mlx5_0 mlx5_1; do
  d=/sys/class/infiniband/$dev
  mkdir -p $d/device/net/sim0 $d/ports/1/gid_attrs/types $d/ports/1/gid_attrs/ndevs
  echo 0 > $d/device/numa_node
  echo 1 > $d/device/local_cpus
  # GIDs 0 and 2 RoCE v1, 1 and 3 RoCE v2 (docs/network.md), all on sim0.
  for i in 0 1 2 3; do
    if [ $((i % 2)) = 0 ]; then echo "IB/RoCE v1"; else echo "RoCE v2"; fi > $d/ports/1/gid_attrs/types/$i
    echo sim0 > $d/ports/1/gid_attrs/ndevs/$i
  done
done
mkdir -p /dev/infiniband
mount -t tmpfs mlx5sim /dev/infiniband
mknod -m 666 /dev/infiniband/uverbs0 c 1 3
mknod -m 666 /dev/infiniband/uverbs1 c 1 3
exec "$@"
EOF

# The server, then the client a second later, in one namespace; their exits in rc_s, rc_c.
# `ns_pair NAME SERVER-ENV CLIENT-ENV CMD...`: the client gets the server's address last.
ns_pair() {
  local name=$1 senv=$2 cenv=$3
  shift 3
  # shellcheck disable=SC2016
  unshare -m -n sh "$ns_script" bash -c '
    bin=$1 name=$2 senv=$3 cenv=$4; shift 4
    env $senv MLX5SIM_ADDR=127.0.65.1 timeout 40 "$@" > "$bin/$name-server.log" 2>&1 &
    server=$!
    sleep 1
    env $cenv MLX5SIM_ADDR=127.0.65.5 timeout 30 "$@" 127.0.65.1 > "$bin/$name-client.log" 2>&1
    echo $? > "$bin/$name-client.rc"
    wait $server
    echo $? > "$bin/$name-server.rc"' ns "$bin" "$name" "$senv LD_LIBRARY_PATH=$shim" "$cenv LD_LIBRARY_PATH=$shim" "$@" \
    > "$bin/$name-ns.log" 2>&1
  rc_s=$(cat "$bin/$name-server.rc" 2> /dev/null || echo "none ($(tail -1 "$bin/$name-ns.log"))")
  rc_c=$(cat "$bin/$name-client.rc" 2> /dev/null || echo none)
  rm -f "$bin/$name-server.rc" "$bin/$name-client.rc"
}

why=""
if [ "$(id -u)" != 0 ]; then why="not root (the namespace needs it)"
elif ! command -v unshare > /dev/null || ! command -v ip > /dev/null; then why="no unshare or ip"
elif [ ! -c /dev/net/tun ]; then why="no /dev/net/tun for the TAP interface"
elif ! out=$(unshare -m -n sh "$ns_script" true 2>&1); then why="the namespace cannot be made: $out"
fi
if [ -n "$why" ]; then
  echo "  skip: UCX and libfabric: $why"
else
  # UCX: its IB transports only (it would take shared memory between two local processes).
  ucx="UCX_NET_DEVICES=mlx5_0:1 UCX_TLS=rc_verbs,ud_verbs,self"
  out=$(unshare -m -n sh "$ns_script" env LD_LIBRARY_PATH=$shim MLX5SIM_ADDR=127.0.65.1 timeout 20 ucx_info -d 2>&1)
  tls=$(echo "$out" | grep -A1 "Transport: \(rc\|ud\)_verbs" | grep -c "Device: mlx5_0:1")
  if [ "$tls" = 2 ]; then
    pass "ucx_info -d lists rc_verbs and ud_verbs on mlx5_0:1"
  else
    fail "ucx_info -d: $(echo "$out" | grep -i "transport\|error" | head -5 | tr '\n' ' ')"
  fi
  port=$((20000 + RANDOM % 20000))
  for t in "tag_lat -n 1000" "tag_bw -s 65536 -n 200" "ucp_put_bw -s 100000 -n 100" "ucp_get -s 100000 -n 100"; do
    port=$((port + 1))
    pcap=""
    [ "$t" = "tag_lat -n 1000" ] && pcap="MLX5SIM_PCAP=$bin/ucx-server.pcap"
    ns_pair ucx "$ucx $pcap" "$ucx" ucx_perftest -p "$port" -t $t
    final=$(grep '^Final:' "$bin/ucx-client.log" | tr -s ' ')
    if [ "$rc_c" = 0 ] && [ "$rc_s" = 0 ] && [ -n "$final" ]; then
      pass "ucx_perftest -t $t over rc_verbs/ud_verbs: both exit 0; the client reports $final"
    else
      fail "ucx_perftest -t $t: exits $rc_s/$rc_c: $(grep -i "error\|fatal" "$bin/ucx-server.log" "$bin/ucx-client.log" | head -3 | tr '\n' ' ')"
    fi
    if [ -n "$pcap" ]; then
      # UCX's UD wire-up and its RC traffic on the wire: UD SEND Only (100) with UCX's Q_Key.
      ud=$(tshark -r "$bin/ucx-server.pcap" -Y "infiniband.bth.opcode == 100" -T fields -e infiniband.deth.q_key 2> /dev/null |
        sort | uniq -c | awk '{printf "%s x %s ", $1, $2}')
      rc=$(tshark -r "$bin/ucx-server.pcap" -Y "infiniband.bth.opcode < 32" 2> /dev/null | wc -l)
      if out=$(tshark_clean "$bin/ucx-server.pcap") && echo "$ud" | grep -q "0x000000001ee7a330" && [ "$rc" -gt 2000 ]; then
        pass "the UCX capture: $out RRoCE packets, clean; UD (Q_Key): $ud; $rc RC packets"
      else
        fail "the UCX capture: $out; UD (Q_Key): $ud; $rc RC packets"
      fi
    fi
  done
  port=$((port + 1))
  ns_pair ucx-ud "UCX_NET_DEVICES=mlx5_0:1 UCX_TLS=ud_verbs,self" "UCX_NET_DEVICES=mlx5_0:1 UCX_TLS=ud_verbs,self" \
    ucx_perftest -p "$port" -t tag_lat -n 500
  final=$(grep '^Final:' "$bin/ucx-ud-client.log" | tr -s ' ')
  if [ "$rc_c" = 0 ] && [ "$rc_s" = 0 ] && [ -n "$final" ]; then
    pass "ucx_perftest -t tag_lat over ud_verbs alone: both exit 0; the client reports $final"
  else
    fail "ucx_perftest over ud_verbs: exits $rc_s/$rc_c: $(grep -i "error\|fatal" "$bin/ucx-ud-server.log" "$bin/ucx-ud-client.log" | head -3 | tr '\n' ' ')"
  fi

  # UCX's client-server example (libucx-dev): the client reaches the server's listener by its
  # socket address, through UCX's rdmacm connection manager alone (UCX_SOCKADDR_TLS_PRIORITY),
  # which connects with rdma_cm's REQ, REP and RTU: the server's capture must hold them. The
  # example's server never exits: ucx-cs.sh stops it once it has served one client. Each side
  # prints the message (the client what it sent, the server what it received): 'A' to 'Z'
  # over and over, as long as -s says less one, and a full stop.
  ex=/usr/share/doc/libucx-dev/examples
  if [ ! -f $ex/ucp_client_server.c ] || [ ! -f /usr/include/ucp/api/ucp.h ]; then
    echo "  skip: UCX's client-server example: no $ex/ucp_client_server.c or UCX headers (libucx-dev)"
  elif ! cc -O1 -I$ex $ex/ucp_client_server.c -o "$bin/ucp_client_server" -lucp -lucs > "$bin/ucp_client_server.build.log" 2>&1; then
    fail "UCX's client-server example does not build: $(head -3 "$bin/ucp_client_server.build.log" | tr '\n' ' ')"
  else
    cat > "$bin/ucx-cs.sh" << 'EOF'
# ucx-cs.sh PROGRAM ARGS... [SERVER-ADDRESS]: with an address last, the client (-a ADDRESS);
# without, the server, stopped once it waits for a second client (it spins for ever
# otherwise: its own timeout ends it if this script is killed first).
last=${!#}
case $last in
  [0-9]*.*.*.*) set -- "${@:1:$#-1}" -a "$last"; exec stdbuf -oL "$@" ;;
esac
out=$(mktemp)
timeout 30 stdbuf -oL "$@" > "$out" 2>&1 &
pid=$!
for _ in $(seq 300); do
  [ "$(grep -c '^Waiting for connection' "$out")" -ge 2 ] && break
  kill -0 $pid 2> /dev/null || break
  sleep 0.1
done
kill $pid 2> /dev/null
wait $pid
served=$(grep -c '^Waiting for connection' "$out")
cat "$out"
rm -f "$out"
[ "$served" -ge 2 ]
EOF
    ucx_cm="UCX_NET_DEVICES=mlx5_0:1 UCX_TLS=rc_verbs,ud_verbs,self UCX_SOCKADDR_TLS_PRIORITY=rdmacm"
    for mode in "stream 16 1" "tag 100000 20" "am 100000 1"; do
      read -r api size iters <<< "$mode"
      want=$(awk -v n="$size" 'BEGIN { for (i = 0; i < n - 1; i++) printf "%c", 65 + i % 26; print "." }')
      ns_pair ucx-cs "$ucx_cm MLX5SIM_PCAP=$bin/ucx-cs-server.pcap" "$ucx_cm" \
        bash "$bin/ucx-cs.sh" "$bin/ucp_client_server" -c "$api" -s "$size" -i "$iters"
      # The first and the last iteration print the message.
      prints=$((iters > 1 ? 2 : 1))
      sent=$(grep -cxF "$want" "$bin/ucx-cs-client.log")
      got=$(grep -cxF "$want" "$bin/ucx-cs-server.log")
      received=$(grep -c "^UCX data message was received" "$bin/ucx-cs-server.log")
      cm=$(tshark -r "$bin/ucx-cs-server.pcap" --disable-protocol rpcordma 2> /dev/null | grep -o "CM: [A-Za-z]*" |
        sort | uniq -c | awk '{printf "%s %s, ", $1, $3}')
      if [ "$rc_c" = 0 ] && [ "$rc_s" = 0 ] && [ "$sent" = $prints ] && [ "$got" = $prints ] && [ "$received" = $prints ] &&
        echo "$cm" | grep -q "1 ConnectRequest, " && echo "$cm" | grep -q "1 ConnectReply, " &&
        echo "$cm" | grep -q "1 ReadyToUse, " && out=$(tshark_clean "$bin/ucx-cs-server.pcap"); then
        pass "ucp_client_server -c $api -s $size -i $iters through UCX's rdmacm CM: the server received the client's ${#want}-byte text; its capture: $out packets, CM: ${cm%, }"
      else
        fail "ucp_client_server -c $api -s $size -i $iters: exits $rc_s/$rc_c, text sent $sent, received $got/$received (of $prints); CM: $cm $(grep -i "error\|fail" "$bin/ucx-cs-server.log" "$bin/ucx-cs-client.log" | head -3 | tr '\n' ' ')"
      fi
    done
  fi

  # libfabric: MSG endpoints (RC through rdma_cm; the server listens on "localhost", the
  # wildcard), DGRAM (UD) and RDM over DGRAM (ofi_rxd); -c checks the data. RDM over MSG
  # (ofi_rxm, which fi_pingpong would pick first) is left out: libfabric's verbs provider
  # drops a source address in 127.0.0.0/8 as a loopback one (vrb_fill_addr), so its server
  # listens on 0.0.0.0 and hands the client that address, which libfabric's address vector
  # refuses (fi_av_insert: ofi_valid_dest_ipaddr), as it would on a card; the simulated
  # network has no other addresses.
  out=$(unshare -m -n sh "$ns_script" env LD_LIBRARY_PATH=$shim MLX5SIM_ADDR=127.0.65.1 timeout 20 fi_info -p verbs 2>&1)
  if echo "$out" | grep -q "domain: mlx5_0$" && echo "$out" | grep -q "domain: mlx5_0-dgram"; then
    pass "fi_info -p verbs lists mlx5_0 (FI_EP_MSG) and mlx5_0-dgram (FI_EP_DGRAM)"
  else
    fail "fi_info -p verbs: $(echo "$out" | head -5 | tr '\n' ' ')"
  fi
  # How far RDM over ofi_rxm gets: the client's fi_getinfo resolves the server's 0.0.0.0 (the
  # kernel's loopback resolution), then libfabric's address vector refuses it.
  ns_pair fi-rxm "" "" fi_pingpong -p "verbs;ofi_rxm" -e rdm -I 10 -S 1024 -c
  if grep -q "fi_av_insert: number of addresses inserted = 0" "$bin/fi-rxm-client.log" &&
    ! grep -q "fi_getinfo" "$bin/fi-rxm-client.log"; then
    echo "  skip: fi_pingpong -p 'verbs;ofi_rxm' -e rdm: libfabric drops 127.0.0.0/8 source addresses, its server hands out 0.0.0.0, the client's fi_av_insert refuses it"
  else
    fail "fi_pingpong -p 'verbs;ofi_rxm' -e rdm, exits $rc_s/$rc_c, not where libfabric refuses 0.0.0.0: $(grep -v '^libfabric' "$bin/fi-rxm-client.log" | head -3 | tr '\n' ' ')"
  fi
  # Each pair has a namespace of its own: fi_pingpong's default control port is free there.
  for e in msg dgram rdm; do
    prov=verbs
    [ "$e" = rdm ] && prov="verbs;ofi_rxd"
    ns_pair "fi-$e" "" "" fi_pingpong -p "$prov" -e "$e" -I 100 -S 1024 -c
    row=$(grep '^1k' "$bin/fi-$e-client.log" | tr -s ' ')
    if [ "$rc_c" = 0 ] && [ "$rc_s" = 0 ] && [ -n "$row" ]; then
      pass "fi_pingpong -p '$prov' -e $e -S 1024 -c: both exit 0; the client reports $row"
    else
      fail "fi_pingpong -e $e: exits $rc_s/$rc_c: $(grep -v '^libfabric' "$bin/fi-$e-server.log" "$bin/fi-$e-client.log" | head -3 | tr '\n' ' ')"
    fi
  done
fi
