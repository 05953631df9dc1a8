#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The benchmark's own link emulator, for kernels with sch_netem:
#
#   netem-link.sh probe                  exit 0 if netem qdiscs can be made here
#   netem-link.sh up RTT_MS RATE_MBIT [LOSS_PCT]
#                                        build (or rebuild) the two-host lab;
#                                        LOSS_PCT of packets dropped each way
#   netem-link.sh down                   tear it all down
#   netem-link.sh cut | heal             drop every packet both ways / stop
#
# Topology (the same shape as an external emulator given by
# QFTFS_BENCH_LINK_CMD): the client is the root namespace, 10.78.0.1 on veth
# qftb-c; the server host is network namespace "qftbench", 10.78.0.2 on veth
# qftb-s, with its own sshd on port 22 (temp host key, temp config, and a
# temp client key authorized for root — nothing in ~/.ssh or /etc/ssh is
# touched).  Each veth end gets a netem qdisc holding its egress for half
# the round trip, rate-limited to RATE_MBIT (0 = no limit), so both
# directions see the same link.
#
# State (keys, sshd config, pid, log) lives in $QFTFS_BENCH_STATE
# (default /run/qftfs-bench-netem); the harness reads the client key from
# there.
set -euo pipefail

NS=qftbench
C_IF=qftb-c
S_IF=qftb-s
C_ADDR=10.78.0.1
S_ADDR=10.78.0.2
STATE=${QFTFS_BENCH_STATE:-/run/qftfs-bench-netem}

die() { echo "netem-link.sh: $*" >&2; exit 1; }

probe() {
	local ok=1
	modprobe sch_netem 2>/dev/null || true
	ip link add qftb-probe0 type veth peer name qftb-probe1 2>/dev/null || return 1
	tc qdisc add dev qftb-probe0 root netem delay 1ms 2>/dev/null && ok=0
	ip link del qftb-probe0 2>/dev/null || true
	return $ok
}

down() {
	if [ -f "$STATE/sshd.pid" ]; then
		kill "$(cat "$STATE/sshd.pid")" 2>/dev/null || true
	fi
	# anything still running in the namespace (sessions, iperf3) goes too
	if ip netns pids "$NS" >/dev/null 2>&1; then
		for pid in $(ip netns pids "$NS"); do kill "$pid" 2>/dev/null || true; done
	fi
	ip link del "$C_IF" 2>/dev/null || true
	ip netns del "$NS" 2>/dev/null || true
	rm -rf "$STATE"
}

# netem's queue must hold a full bandwidth-delay product or it drops
# packets and TCP never reaches the rate: 2x BDP in 1500-byte packets.
queue_limit() {
	local rtt=$1 rate=$2 bdp
	bdp=$(( rate * 1000000 * rtt / 8000 ))
	echo $(( bdp * 2 / 1500 > 10000 ? bdp * 2 / 1500 : 10000 ))
}

shape() {
	local dev=$1 rtt=$2 rate=$3 netns=${4:-} loss=${5:-0} args
	[ "$rtt" = 0 ] && [ "$rate" = 0 ] && [ "$loss" = 0 ] && return 0
	# half the round trip each way; netem's delay takes ms with fractions
	args="delay $(awk -v r="$rtt" 'BEGIN { printf "%.3fms", r / 2 }')"
	[ "$rate" != 0 ] && args="$args rate ${rate}mbit"
	[ "$loss" != 0 ] && args="$args loss ${loss}%"
	args="$args limit $(queue_limit "$rtt" "$rate")"
	if [ -n "$netns" ]; then
		# shellcheck disable=SC2086
		ip netns exec "$netns" tc qdisc add dev "$dev" root netem $args
	else
		# shellcheck disable=SC2086
		tc qdisc add dev "$dev" root netem $args
	fi
}

# A cut as a pulled cable: both ends drop every packet they would send,
# silently (netem's loss 100%), until heal puts the link's shape back.
cut() {
	[ -f "$STATE/link" ] || die "no link is up"
	tc qdisc replace dev "$C_IF" root netem loss 100%
	ip netns exec "$NS" tc qdisc replace dev "$S_IF" root netem loss 100%
}

heal() {
	local rtt rate loss
	[ -f "$STATE/link" ] || die "no link is up"
	read -r rtt rate loss <"$STATE/link"
	tc qdisc del dev "$C_IF" root 2>/dev/null || true
	ip netns exec "$NS" tc qdisc del dev "$S_IF" root 2>/dev/null || true
	shape "$C_IF" "$rtt" "$rate" "" "${loss:-0}"
	shape "$S_IF" "$rtt" "$rate" "$NS" "${loss:-0}"
}

up() {
	local rtt=$1 rate=$2 loss=${3:-0}
	case "$rtt$rate" in *[!0-9]*) die "RTT_MS and RATE_MBIT must be integers" ;; esac
	case "$loss" in ''|*[!0-9.]*) die "LOSS_PCT must be a number" ;; esac
	down
	mkdir -p "$STATE" /run/sshd
	chmod 700 "$STATE"
	ssh-keygen -q -t ed25519 -N '' -f "$STATE/ssh_host_ed25519_key"
	ssh-keygen -q -t ed25519 -N '' -f "$STATE/id_ed25519"
	cp "$STATE/id_ed25519.pub" "$STATE/authorized_keys"
	cat >"$STATE/sshd_config" <<-EOF
		ListenAddress $S_ADDR
		Port 22
		HostKey $STATE/ssh_host_ed25519_key
		PidFile $STATE/sshd.pid
		AuthorizedKeysFile $STATE/authorized_keys
		PermitRootLogin prohibit-password
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		MaxStartups 100
		MaxSessions 100
		Subsystem sftp /usr/lib/openssh/sftp-server
	EOF

	ip netns add "$NS"
	ip link add "$C_IF" type veth peer name "$S_IF"
	ip link set "$S_IF" netns "$NS"
	ip addr add "$C_ADDR/24" dev "$C_IF"
	ip link set "$C_IF" up
	ip netns exec "$NS" ip addr add "$S_ADDR/24" dev "$S_IF"
	ip netns exec "$NS" ip link set "$S_IF" up
	ip netns exec "$NS" ip link set lo up
	shape "$C_IF" "$rtt" "$rate" "" "$loss"
	shape "$S_IF" "$rtt" "$rate" "$NS" "$loss"
	echo "$rtt $rate $loss" >"$STATE/link"

	ip netns exec "$NS" /usr/sbin/sshd -f "$STATE/sshd_config" -E "$STATE/sshd.log"
	for _ in $(seq 50); do
		ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
			-o LogLevel=ERROR -o IdentitiesOnly=yes -i "$STATE/id_ed25519" \
			"root@$S_ADDR" true 2>/dev/null && return 0
		sleep 0.2
	done
	die "ssh to $S_ADDR does not answer (see $STATE/sshd.log)"
}

[ "$(id -u)" -eq 0 ] || die "must run as root"
case ${1:-} in
probe) probe ;;
up) [ $# -eq 3 ] || [ $# -eq 4 ] ||
	die "usage: netem-link.sh up RTT_MS RATE_MBIT [LOSS_PCT]"
	up "$2" "$3" "${4:-0}" ;;
down) down ;;
cut) cut ;;
heal) heal ;;
*) echo "usage: netem-link.sh probe | up RTT_MS RATE_MBIT | down | cut | heal" >&2; exit 2 ;;
esac
