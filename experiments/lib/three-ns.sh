# The experiment kits' topology, sourced by experiments/shaper/run.sh and
# experiments/emulation/run.sh: three network namespaces in a line,
#
#   $ns_snd  s0 ==veth== s1  $ns_shp  r1 ==veth== r0  $ns_rcv
#   NET.1                                             NET.2
#
# with IPv6 off (no router solicitations or neighbour discovery through the shaper),
# static neighbours (no ARP has to cross it) and the shaper's two ends promiscuous. The
# caller names the namespaces (`ns_snd`, `ns_shp`, `ns_rcv`), keeps a `created_ns` array
# (each namespace is appended as it is made, so that its trap deletes exactly those) and
# calls `three_ns_build NET` (`10.77.0`). `wait_for` is the kits' wait for a process's
# readiness line.

in_ns() { local n=$1; shift; ip netns exec "$n" "$@"; }

# The MAC address of interface $2 in namespace $1.
mac() { ip -n "$1" -o link show "$2" | awk '{for (i = 1; i < NF; i++) if ($i == "link/ether") print $(i + 1)}'; }

three_ns_build() {
    local net=$1 n l
    for n in "$ns_snd" "$ns_shp" "$ns_rcv"; do
        ip netns add "$n"
        created_ns+=("$n")
        in_ns "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
        ip -n "$n" link set lo up
    done
    ip -n "$ns_snd" link add s0 type veth peer name s1 netns "$ns_shp"
    ip -n "$ns_shp" link add r1 type veth peer name r0 netns "$ns_rcv"
    ip -n "$ns_snd" addr add "$net.1/24" dev s0
    ip -n "$ns_rcv" addr add "$net.2/24" dev r0
    for l in "$ns_snd s0" "$ns_shp s1" "$ns_shp r1" "$ns_rcv r0"; do
        set -- $l
        ip -n "$1" link set "$2" up
    done
    ip -n "$ns_snd" neigh replace "$net.2" lladdr "$(mac "$ns_rcv" r0)" dev s0 nud permanent
    ip -n "$ns_rcv" neigh replace "$net.1" lladdr "$(mac "$ns_snd" s0)" dev r0 nud permanent
    ip -n "$ns_shp" link set s1 promisc on
    ip -n "$ns_shp" link set r1 promisc on
}

# waits until file $1 contains $2 while process $3 stays alive, at most $4 seconds (10)
wait_for() {
    local i tries=$(( ${4:-10} * 20 ))
    for i in $(seq 1 "$tries"); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        kill -0 "$3" 2>/dev/null || { echo "error: process exited early:" >&2; cat "$1" >&2; return 1; }
        sleep 0.05
    done
    echo "error: no '$2' after ${4:-10} s in $1" >&2
    return 1
}
