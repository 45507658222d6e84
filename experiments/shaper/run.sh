#!/usr/bin/env bash
# The shaper experiment kit (pspat issue 7): pspat shaping vs Linux TC HTB vs no
# scheduling, on a topology of network namespaces and veth pairs it creates and removes.
#
#   ns snd             ns shp                          ns rcv
#   udpgen --- s0 ==veth== s1 [shaper or bridge] r1 ==veth== r0 --- udpsink
#   10.77.0.1                                               10.77.0.2
#
# Usage (as root): experiments/shaper/run.sh [--quick] [options]; see --help and
# docs/EXPERIMENTS.md. Writes experiments/shaper/results/{results.csv,shares.csv,*.svg}
# (the tree set: trees.csv, trees.txt, tree-*.svg) and each run's reports and logs under
# results/runs/ (not committed), and prints a summary table per set.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
tree_window_default=5   # the tree set's counting window, seconds (whole one-second windows)
tree_warmup_default=3   # and its warm-up: pspat shape takes 1-2 s to settle (docs/EXPERIMENTS.md)
subscribers_window_default=20  # the subscribers set's: ~3000 packets per subscriber of 1000

usage() {
    cat <<EOF
usage: $0 [--quick] [--senders "1 2 4 8 16 32"] [--modes "pspat htb none"]
          [--sets "shares cpu idle"] [--out DIR] [--pspat BIN] [--duration S] [--warmup S]
          [--link-mbit N] [--overload X] [--idle-load X] [--alg NAME] [--sink-spin-us N]
          [--shaper-nice N] [--sink-nice N] [--shaper-cpus LIST] [--shape-args "OPTIONS"]
          [--receiver-rps MASK|off] [--layout shared|forwarder] [--trees "NAME ..."]
          [--tree-greedy-mbit N] [--subscribers N]

Runs, for each set, each number of senders M and each mode, one measurement:
  modes  pspat: 'pspat shape' forwards s1 -> r1 (AF_PACKET), scheduled by a generated
                dummynet configuration (one queue per sender, weighted, on one link)
         htb:   a bridge s1-r1 with an HTB tree on r1's egress, same weights and rates
         none:  the bridge alone (r1's default qdisc)
  sets   shares: link of --link-mbit (default 200) Mbit/s, senders paced to --overload
                 (default 2) times the link in all: the link is the bottleneck; measures
                 shares and victim latency
         cpu:    link of 10 Gbit/s, senders as fast as they can: the CPU is the limit;
                 measures delivered packets per second
         idle:   link of --link-mbit, the senders paced to --idle-load (default 0.01)
                 of it in all: the victim's added latency on an idle link
         tree:   not run unless asked for: each tree of --trees (default: all of
                 experiments/shaper/trees/*.ipfw), pspat against HTB (the same tree,
                 generated from pspat's configuration) and the reference allocation,
                 per leaf; every class's one-second windows and bursts against its ceil.
                 One sender per leaf, paced as tree_offered says (greedy ones at
                 --tree-greedy-mbit, default 25); modes pspat and htb (none has no
                 tree); a ${tree_window_default}-second window (quick: 3) after a
                 ${tree_warmup_default}-second warm-up (quick: 2; --warmup sets it too)
         subscribers: not run unless asked for: a tree of --subscribers (default 1000)
                 subscriber classes under 4 sites on the cpu set's 10 Gbit/s link, one
                 unpaced sender each, in 8 threads (the CPU is the limit); pspat against HTB with the
                 same classes and hashed u32 filters: packets per second, and each
                 subscriber's throughput against the tree's allocation of what the shaper
                 delivered; a ${subscribers_window_default}-second window (quick: 3) after the
                 tree set's warm-up
  Every run also measures the CPU time per forwarded packet: the shaper's threads (pspat)
  and the softirq time of all CPUs (every mode) over the counting window, per packet the
  sink counted. Each row of a mode is set against the bridge alone (none) of the same M:
  the victim's added p50 and p99 latency.
--quick: M in 2 8, shorter runs (about 30 s per set).
--sink-spin-us N|block: "block" (the default): the sink sleeps in recvmmsg and never
  spins; N: it busy-polls, spinning N us after each datagram before it sleeps (0: it
  spins all the time). Spinning suits a sink with a CPU of its own; here it shares one
  with the shaper and takes its time (see docs/EXPERIMENTS.md).
--shaper-nice N: pspat shape's nice value (default -20: it shares the CPUs with the
  senders and the sink; the kernel's forwarding work that HTB does runs in softirq context).
--sink-nice N: the sink's nice value (default -20, as the shaper's: on the CPU the two
  share, a sink at 0 is starved by the shaper, overflows its socket buffer and counts
  less than the shaper delivered; HTB's sink has its CPU to itself either way).
--shaper-cpus LIST: the CPUs pspat shape runs on (taskset -c; default: the last CPU, the
  one the senders do not use, which it shares with the sink).
--shape-args "OPTIONS": more options for pspat shape, e.g. "--handoff dispatchers:2".
--receiver-rps MASK|off: RPS CPU mask (hex) of the receiver's interface r0, in every mode
  (default: the senders' CPUs, all but the last). The receiver's IP and UDP work runs on
  the CPU that put the frame into r0's veth pair: the senders' for the kernel bridge (HTB,
  none), the shaper's for pspat, beside the shaper. On a real network the receiver is
  another machine; RPS keeps its work off the shaper's CPU. "off": no RPS.
--layout shared|forwarder: where the forwarding work runs. shared (the default): the
  senders and the kernel's forwarding (the bridge and HTB, the veth receive and AF_PACKET
  copy for pspat) on the first CPUs, pspat shape and the sink on the last one. forwarder:
  the last CPU is the forwarder's alone, in every mode: RPS on s1 moves the receive work
  of the shaper's input there (the bridge and HTB in softirq, or the veth receive and the
  AF_PACKET copy beside pspat shape's threads), and the sink joins the senders on CPU 0;
  the delivered rate is then the forwarder's on one CPU (docs/EXPERIMENTS.md).
Needs root (network namespaces). Removes everything it created, also on error or Ctrl-C.
EOF
}

# ---- settings --------------------------------------------------------------------------
senders_list="1 2 4 8 16 32"
modes="pspat htb none"
sets="shares cpu idle"
out="$here/results"
pspat_bin="$repo/target/release/pspat"
duration=""          # counting window per run, seconds (default 3, quick 1.5)
warmup=""            # seconds before counting (default 1, quick 0.5)
link_mbit=200        # the 'shares' set's link
alg="wf2q+"          # pspat's scheduling algorithm
sink_spin_us=block   # the sink sleeps in recvmmsg (see --help and docs/EXPERIMENTS.md)
shaper_nice=-20      # pspat shape runs at this nice value (see docs/EXPERIMENTS.md)
sink_nice=-20        # udpsink runs at this nice value (see --help)
shaper_cpus=""       # CPUs pspat shape may run on (default: the sink's, the last one)
receiver_rps=""      # RPS mask of the receiver's r0 (default: the senders' CPUs; off: none)
layout=shared        # shared | forwarder (see --help)
shape_args=""        # more options for pspat shape (e.g. "--handoff dispatchers:2")
quick=0

len=1000             # greedy senders' packet length on the wire, bytes
victim_len=200
victim_rate=1000     # packets/s
victim_weight=20
weights="1,2,3,4"    # sender i has weight 1 + (i mod 4)
qlimit=100           # packets per queue, pspat and pfifo alike
overload=2           # 'shares' set: offered load / link rate
idle_load=0.01       # 'idle' set: offered load of the greedy senders / link rate
port=9000
base=10000           # sender i sends from port base + i
victim_port=20000

# The tree set: each tree is experiments/shaper/trees/NAME.ipfw, a pspat configuration
# whose rules send sender i's port (base + i) to a leaf; here, what each sender offers,
# Mbit/s of $len-byte frames, in port order; g: a greedy sender, --tree-greedy-mbit
# (default 25, half the trees' 50 Mbit/s links: more than any of their leaves is owed).
# The HTB twin and the reference allocation are derived from the configuration (pspat
# experiment tree htb, compare).
trees_dir="$here/trees"
trees=""
tree_greedy_mbit=25
subscribers=1000     # the subscribers set's subscriber classes (and senders)
subscriber_threads=8 # the threads its senders share (udpgen --threads; at most $subscribers)
declare -A tree_offered=(
    [two-level]="g g g 6 g"
    [three-level]="g g g 4 g"
    [root-prio]="4 g g g g 4"
)

while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --senders) senders_list="$2"; shift ;;
        --modes) modes="$2"; shift ;;
        --sets) sets="$2"; shift ;;
        --out) out="$2"; shift ;;
        --pspat) pspat_bin="$2"; shift ;;
        --duration) duration="$2"; shift ;;
        --warmup) warmup="$2"; shift ;;
        --link-mbit) link_mbit="$2"; shift ;;
        --alg) alg="$2"; shift ;;
        --overload) overload="$2"; shift ;;
        --idle-load) idle_load="$2"; shift ;;
        --sink-spin-us) sink_spin_us="$2"; shift ;;
        --shape-args) shape_args="$2"; shift ;;
        --shaper-nice) shaper_nice="$2"; shift ;;
        --sink-nice) sink_nice="$2"; shift ;;
        --shaper-cpus) shaper_cpus="$2"; shift ;;
        --receiver-rps) receiver_rps="$2"; shift ;;
        --layout) layout="$2"; shift ;;
        --trees) trees="$2"; shift ;;
        --tree-greedy-mbit) tree_greedy_mbit="$2"; shift ;;
        --subscribers) subscribers="$2"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ "$quick" = 1 ]; then
    [ "$senders_list" = "1 2 4 8 16 32" ] && senders_list="2 8"
    duration=${duration:-1.5}
    tree_window_default=3
    tree_warmup_default=2
    subscribers_window_default=3
fi
# an explicit --warmup holds for the tree set too
[ -z "$warmup" ] || tree_warmup_default=$warmup
if [ "$quick" = 1 ]; then warmup=${warmup:-0.5}; fi
duration=${duration:-3}
warmup=${warmup:-1}

if [ "$sink_spin_us" = block ]; then
    sink_poll=""
else
    sink_poll="--busy-poll --spin-us $sink_spin_us"
fi

if [ "$(id -u)" != 0 ]; then
    echo "error: run as root: the kit creates network namespaces and veth pairs" >&2
    exit 1
fi
for tool in ip tc awk getconf; do
    command -v "$tool" >/dev/null || { echo "error: '$tool' is not installed" >&2; exit 1; }
done
case "$receiver_rps" in
    ''|off) ;;
    *[!0-9a-fA-F,]*) echo "error: --receiver-rps '$receiver_rps': expected a hex CPU mask or off" >&2; exit 2 ;;
esac
case "$layout" in
    shared|forwarder) ;;
    *) echo "error: --layout '$layout': expected shared or forwarder" >&2; exit 2 ;;
esac
for m in $modes; do
    case "$m" in pspat|htb|none) ;; *) echo "error: unknown mode '$m'" >&2; exit 2 ;; esac
done
for s in $sets; do
    case "$s" in shares|cpu|idle|tree|subscribers) ;; *) echo "error: unknown set '$s'" >&2; exit 2 ;; esac
done
if [ -z "$trees" ]; then
    trees=$(cd "$trees_dir" && for f in *.ipfw; do printf '%s ' "${f%.ipfw}"; done)
fi
case "$subscribers" in
    ''|*[!0-9]*) echo "error: --subscribers '$subscribers' is not a number" >&2; exit 2 ;;
esac
if [ "$subscribers" -lt 1 ] || [ "$subscribers" -gt 1000 ]; then
    echo "error: --subscribers $subscribers is outside 1..1000" >&2; exit 2
fi
case "$tree_greedy_mbit" in
    ''|*[!0-9.]*) echo "error: --tree-greedy-mbit '$tree_greedy_mbit' is not a number" >&2; exit 2 ;;
esac
for t in $trees; do
    [ -f "$trees_dir/$t.ipfw" ] || { echo "error: no tree '$t' ($trees_dir/$t.ipfw)" >&2; exit 2; }
    [ -n "${tree_offered[$t]:-}" ] || { echo "error: tree '$t' has no tree_offered entry in $0" >&2; exit 2; }
done
for m in $senders_list; do
    case "$m" in ''|*[!0-9]*) echo "error: sender count '$m' is not a number" >&2; exit 2 ;; esac
    if [ "$m" -lt 1 ] || [ "$m" -gt 1000 ]; then
        echo "error: sender count $m is outside 1..1000" >&2; exit 2
    fi
done
if [ ! -x "$pspat_bin" ]; then
    echo "building pspat (cargo build --release -p pspat) ..." >&2
    (cd "$repo" && cargo build --release -p pspat)
fi
have_shape=1
if ! "$pspat_bin" shape --help >/dev/null 2>&1; then
    have_shape=0
    case " $modes " in *" pspat "*)
        echo "warning: this pspat has no 'shape' subcommand: mode pspat is skipped" >&2 ;;
    esac
fi

# ---- topology ----------------------------------------------------------------------------
# Names are unique to this run (prefix + PID), so two kits, or anything else on the host,
# never collide; the host's own namespace and interfaces are never touched.
pfx="pspx$$"
ns_snd="$pfx-snd"; ns_shp="$pfx-shp"; ns_rcv="$pfx-rcv"
created_ns=()
pids=()
tmp=$(mktemp -d "/tmp/$pfx.XXXXXX")

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    for p in "${pids[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    # Deleting a namespace destroys its veths and their peers, bridges and qdiscs.
    for n in "${created_ns[@]}"; do
        ip netns del "$n" 2>/dev/null || true
    done
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=../lib/three-ns.sh
. "$repo/experiments/lib/three-ns.sh"
three_ns_build 10.77.0

# ---- helpers -------------------------------------------------------------------------------
# The sink runs on the last CPU, the senders on the others (with the kernel's forwarding
# work, done in their softirq context): a sink that shared its CPU with the senders would
# fall behind them, and its socket buffer would become the bottleneck. pspat shape runs on
# the CPUs the senders leave (--shaper-cpus): unpinned, the scheduler moved its threads
# among the senders' and it forwarded half as much at 8 senders or more.
ncpu=$(nproc)
sink_cpu=$((ncpu - 1))
if [ "$ncpu" -ge 2 ]; then gen_cpus="0-$((ncpu - 2))"; else gen_cpus=0; fi
shaper_cpus=${shaper_cpus:-$((ncpu - 1))}
if [ "$layout" = forwarder ]; then
    if [ "$ncpu" -lt 2 ]; then
        echo "error: --layout forwarder needs at least 2 CPUs" >&2
        exit 2
    fi
    sink_cpu=0
fi
# the sysfs CPU mask (comma-separated 32-bit hex groups, most significant first) of CPUs
# 0..$1-1
low_cpus_mask() {
    local n=$1 groups="" bits g
    while [ "$n" -gt 0 ] || [ -z "$groups" ]; do
        bits=$(( n > 32 ? 32 : n ))
        g=$(printf '%08x' $(( (1 << bits) - 1 )))
        groups="$g${groups:+,$groups}"
        n=$(( n - bits ))
    done
    echo "$groups"
}
# The receiving host's protocol work (IP and UDP delivery to the sink's socket) runs where
# a frame enters r0: on whichever CPU transmitted it into the veth pair, the senders' for
# the kernel's bridge (htb, none), the shaper's for pspat. On a real network the receiver
# is another machine. RPS on r0 (--receiver-rps), set the same way for every mode, sends
# that work to the senders' CPUs.
if [ -z "$receiver_rps" ]; then
    if [ "$ncpu" -ge 2 ]; then receiver_rps=$(low_cpus_mask $((ncpu - 1))); else receiver_rps=off; fi
fi
if [ "$receiver_rps" != off ]; then
    in_ns "$ns_rcv" sh -c "echo $receiver_rps > /sys/class/net/r0/queues/rx-0/rps_cpus"
fi
# --layout forwarder: s1's receive work (the bridge and HTB, or the veth receive and the
# AF_PACKET copy for pspat) on the last CPU, the forwarder's, instead of the senders'.
if [ "$layout" = forwarder ]; then
    # the sysfs mask of the last CPU alone: its bit in the most significant 32-bit group
    last=$((ncpu - 1))
    fwd_mask=$(printf '%08x' $(( 1 << (last % 32) )))
    for ((g = 0; g < last / 32; g++)); do fwd_mask="$fwd_mask,00000000"; done
    in_ns "$ns_shp" sh -c "echo $fwd_mask > /sys/class/net/s1/queues/rx-0/rps_cpus"
fi

# The unit of /proc/stat's and /proc/PID/stat's CPU times (USER_HZ).
clk_tck=$(getconf CLK_TCK)

# cpu_sample FILE [PID]: the CPU counters now, in the format crates/expkit/src/cpu.rs
# reads: the wall clock in µs, the counters' unit, /proc/stat's cpu lines (the softirq
# time of all CPUs and of each) and, with a PID, the shaper's /proc/PID/stat (its utime
# and stime, all threads). Shell builtins only, so that the sample costs no process and
# its parts are microseconds apart. /proc/softirqs (how often each softirq ran, per CPU:
# counts, not time) goes beside it, to see which softirqs the time went to.
cpu_sample() {
    local t=$EPOCHREALTIME stat irqs proc="" l
    mapfile -t stat </proc/stat
    if [ -n "${2:-}" ]; then read -r proc <"/proc/$2/stat"; fi
    mapfile -t irqs </proc/softirqs
    {
        echo "time_us ${t//[.,]/}"
        echo "clk_tck $clk_tck"
        for l in "${stat[@]}"; do
            case "$l" in cpu*) echo "$l" ;; esac
        done
        if [ -n "$proc" ]; then echo "shaper $proc"; fi
    } >"$1"
    printf '%s\n' "${irqs[@]}" >"${1%.txt}-softirqs.txt"
}

# cpu_window DIR WARMUP SECONDS [PID]: samples at the start and the end of the sink's
# counting window (SECONDS long, after WARMUP), into DIR/cpu-before.txt and
# DIR/cpu-after.txt. Started just before udpgen: the sink's
# warm-up starts at the first datagram, a few ms later, so the two windows differ by
# that much at each end; the row compares rates (CPU seconds per second against packets
# per second), not counts.
cpu_window() {
    sleep "$2"
    cpu_sample "$1/cpu-before.txt" "${4:-}"
    sleep "$3"
    cpu_sample "$1/cpu-after.txt" "${4:-}"
}

# link rate of set $1, bit/s
link_of() {
    case "$1" in
        cpu|subscribers) echo 10000000000 ;;
        *) echo $((link_mbit * 1000000)) ;;
    esac
}

# weight of sender $1
weight_of() { local w; IFS=, read -ra w <<<"$weights"; echo "${w[$(($1 % ${#w[@]}))]}"; }


stop() { # pid: TERM, wait, forget
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    local keep=() p
    for p in "${pids[@]}"; do [ "$p" != "$1" ] && keep+=("$p"); done
    pids=("${keep[@]+"${keep[@]}"}")
}

bridge_up() {
    ip -n "$ns_shp" link add br0 type bridge forward_delay 0 stp_state 0
    ip -n "$ns_shp" link set s1 master br0
    ip -n "$ns_shp" link set r1 master br0
    ip -n "$ns_shp" link set br0 up
}

bridge_down() {
    tc -n "$ns_shp" qdisc del dev r1 root 2>/dev/null || true
    ip -n "$ns_shp" link del br0 2>/dev/null || true
}

hexid() { printf '%x' "$1"; }

# HTB on r1: root class at the link rate; one class per sender with rate = link * w / W
# (W: the sum of all weights, the victim's included) and ceil = link, quantum = 1514 * w
# bytes (so the excess is lent in proportion to the weights too); the victim's class the
# same way; pfifo leaves of $qlimit packets; u32 filters on the UDP source port.
htb_up() { # link_bps m
    local link=$1 m=$2 i w total=$victim_weight cls
    for i in $(seq 0 $((m - 1))); do total=$((total + $(weight_of "$i"))); done
    local t="tc -n $ns_shp"
    $t qdisc add dev r1 root handle 1: htb
    # (the root class lends by its children's quanta; its own only silences tc's warning)
    $t class add dev r1 parent 1: classid 1:1 htb rate "${link}bit" ceil "${link}bit" \
        quantum 60000
    for i in $(seq 0 "$m"); do
        if [ "$i" = "$m" ]; then w=$victim_weight; p=$victim_port; else w=$(weight_of "$i"); p=$((base + i)); fi
        cls=$(hexid $((16 + i)))
        $t class add dev r1 parent 1:1 classid "1:$cls" htb \
            rate "$((link * w / total))bit" ceil "${link}bit" quantum $((1514 * w))
        $t qdisc add dev r1 parent "1:$cls" handle "$cls:" pfifo limit "$qlimit"
        $t filter add dev r1 parent 1: protocol ip prio 1 u32 \
            match ip protocol 17 0xff match ip sport "$p" 0xffff flowid "1:$cls"
    done
}

# The dummynet configuration pspat shapes with: one scheduler on the link, one queue per
# sender (and the victim) with its weight and $qlimit slots, one rule per source port.
pspat_config() { # link_bps m file
    local link=$1 m=$2 f=$3 i
    {
        echo "# generated by experiments/shaper/run.sh: $m senders, link $link bit/s"
        echo "sched 1 config type $alg bw $((link / 1000))Kbit/s"
        for i in $(seq 0 $((m - 1))); do
            echo "queue $((i + 1)) config sched 1 weight $(weight_of "$i") queue $qlimit"
            echo "add $((100 * (i + 1))) queue $((i + 1)) udp from any $((base + i)) to any"
        done
        echo "queue $((m + 1)) config sched 1 weight $victim_weight queue $qlimit"
        echo "add $((100 * (m + 1))) queue $((m + 1)) udp from any $victim_port to any"
    } >"$f"
}

# The subscribers set's tree: the 10 Gbit/s link, 4 sites (a quarter of it guaranteed
# each, ceil the link), $1 subscribers in 4 consecutive blocks, one a site, subscriber i
# with weight w = 1 + (i mod 4), rate 100 kbit/s x w, ceil the link, a FIFO of $qlimit
# packets, its datagrams from port base + i.
subscribers_config() { # n file
    local n=$1 f=$2 i w site mbit
    mbit=$(( $(link_of subscribers) / 1000000 ))
    {
        echo "# generated by experiments/shaper/run.sh: $n subscribers under 4 sites"
        echo "pipe 1 config bw ${mbit}Mbit/s"
        echo "sched 1 config type wf2q+"
        for site in 2 3 4 5; do
            echo "sched $site config type wf2q+ parent 1 rate $((mbit / 4))Mbit/s ceil ${mbit}Mbit/s"
        done
        for ((i = 0; i < n; i++)); do
            w=$(weight_of "$i")
            echo "sched $((1000 + i)) config type fifo parent $((2 + 4 * i / n)) rate $((100 * w))Kbit/s ceil ${mbit}Mbit/s weight $w"
            echo "queue $((1000 + i)) config sched $((1000 + i)) queue $qlimit"
            echo "add $((100 + i)) queue $((1000 + i)) udp from any $((base + i)) to any"
        done
    } >"$f"
}

# The configuration of point $2 of the tree set or the subscribers set ($1).
tree_config() {
    if [ "$1" = tree ]; then echo "$trees_dir/$2.ipfw"; else echo "$out/subscribers-$2.ipfw"; fi
}

# The senders of point $2 of the tree set or the subscribers set ($1): how many, and
# their ports (base + i, comma-separated).
tree_senders() {
    if [ "$1" = tree ]; then wc -w <<<"${tree_offered[$2]}"; else echo "$2"; fi
}
tree_ports() {
    local n i ports=""
    n=$(tree_senders "$1" "$2")
    for ((i = 0; i < n; i++)); do ports="$ports${ports:+,}$((base + i))"; done
    echo "$ports"
}
# The tree set's paced rates in packets/s of tree $1.
tree_rates() {
    awk -v len="$len" -v g="$tree_greedy_mbit" '{
        for (i = 1; i <= NF; i++)
            printf "%s%.3f", (i > 1 ? "," : ""), ($i == "g" ? g : $i) * 1e6 / (8 * len)
    }' <<<"${tree_offered[$1]}"
}

# ---- runs ----------------------------------------------------------------------------------
mkdir -p "$out/runs"
csv="$out/results.csv"
shares_csv="$out/shares.csv"
trees_csv="$out/trees.csv"
trees_txt="$out/trees.txt"
rm -f "$csv" "$shares_csv" "$trees_csv" "$trees_txt"
echo "pspat shaper kit: sets [$sets], modes [$modes], M in [$senders_list]; per run" \
     "${warmup}s warm-up + ${duration}s counted (tree set: ${tree_warmup_default}s +" \
     "${tree_window_default}s; trees [$trees]); namespaces $pfx-*" >&2
run_one() { # set mode m (the tree set: m is the tree's name)
    local set=$1 mode=$2 m=$3 link rate load tag dir sink sampler shaper="" win=$duration
    local warm=$warmup
    local traffic=() sink_extra=() gen_s sink_s
    link=$(link_of "$set")
    case "$set" in
        shares|idle)
            # offered: $overload (shares) or $idle_load (idle) x the link in packets/s,
            # split evenly
            if [ "$set" = shares ]; then load=$overload; else load=$idle_load; fi
            rate=$(awk -v l="$link" -v o="$load" -v len="$len" -v m="$m" \
                'BEGIN { printf "%.3f", l * o / (8 * len) / m }') ;;
        cpu) rate=0 ;;
    esac
    if [ "$set" = tree ]; then
        # one sender per leaf, each paced to its offered rate, no victim; the sink lists
        # every datagram (the one-second windows and the bursts are measured from it)
        win=$tree_window_default
        warm=$tree_warmup_default
        traffic=(--senders "$(tree_senders tree "$m")" --rates "$(tree_rates "$m")")
        sink_extra=(--trace)
    elif [ "$set" = subscribers ]; then
        # one unpaced sender per subscriber, no victim; the senders share a few threads,
        # each taking its senders in turn (a thread each would not run together)
        win=$subscribers_window_default
        warm=$tree_warmup_default
        traffic=(--senders "$m" --rate 0
                 --threads "$(( m < subscriber_threads ? m : subscriber_threads ))")
    else
        traffic=(--senders "$m" --rate "$rate" --victim-rate "$victim_rate"
                 --victim-port "$victim_port" --victim-len "$victim_len")
    fi
    gen_s=$(awk -v w="$warm" -v d="$win" 'BEGIN { print w + d + 0.5 }')
    sink_s=$(awk -v g="$gen_s" 'BEGIN { print g + 20 }')
    tag="$set-$mode-$m"
    dir="$out/runs/$tag"
    mkdir -p "$dir"
    case "$mode-$set" in
        none-*) bridge_up ;;
        htb-tree|htb-subscribers)
            bridge_up
            "$pspat_bin" experiment tree htb --config "$(tree_config "$set" "$m")" \
                --ports "$(tree_ports "$set" "$m")" --dev r1 >"$dir/htb.tc"
            tc -n "$ns_shp" -batch "$dir/htb.tc"
            ;;
        htb-*) bridge_up; htb_up "$link" "$m" ;;
        pspat-*)
            if [ "$set" = tree ] || [ "$set" = subscribers ]; then
                cp "$(tree_config "$set" "$m")" "$dir/config.ipfw"
            else
                pspat_config "$link" "$m" "$dir/config.ipfw"
            fi
            "$pspat_bin" config check --quiet "$dir/config.ipfw" >/dev/null
            # `ip netns exec` execs the command: $! is pspat's own PID.
            ip netns exec "$ns_shp" nice -n "$shaper_nice" taskset -c "$shaper_cpus" "$pspat_bin" shape --in s1 --out r1 --config "$dir/config.ipfw" $shape_args \
                --json "$dir/shape.json" >"$dir/shape.out" 2>"$dir/shape.err" &
            shaper=$!
            pids+=("$shaper")
            wait_for "$dir/shape.err" "pspat shape: ready" "$shaper"
            ;;
    esac
    ip netns exec "$ns_rcv" nice -n "$sink_nice" "$pspat_bin" udpsink --bind "10.77.0.2:$port" --duration "$sink_s" \
        --warmup "$warm" --measure "$win" --idle 1 --cpu "$sink_cpu" \
        $sink_poll "${sink_extra[@]+"${sink_extra[@]}"}" \
        --json "$dir/sink.json" >"$dir/sink.out" 2>"$dir/sink.err" &
    sink=$!
    pids+=("$sink")
    wait_for "$dir/sink.err" "ready" "$sink"
    # Where packets are lost: UDP receive-buffer drops in rcv, backlog drops (softnet).
    in_ns "$ns_rcv" grep '^Udp:' /proc/net/snmp >"$dir/udp-before.txt"
    cat /proc/net/softnet_stat >"$dir/softnet-before.txt"
    rm -f "$dir"/cpu-*.txt
    cpu_window "$dir" "$warm" "$win" "$shaper" &
    sampler=$!
    pids+=("$sampler")
    in_ns "$ns_snd" "$pspat_bin" udpgen --dest "10.77.0.2:$port" "${traffic[@]}" \
        --len "$len" --duration "$gen_s" --src-port-base "$base" \
        --cpus "$gen_cpus" \
        --json "$dir/gen.json" >"$dir/gen.out" 2>"$dir/gen.err" \
        || { echo "error: udpgen failed:" >&2; cat "$dir/gen.err" >&2; return 1; }
    wait "$sampler" || { echo "error: the CPU samples of $tag failed" >&2; return 1; }
    stop "$sampler"
    wait "$sink" || { echo "error: udpsink failed:" >&2; cat "$dir/sink.err" >&2; return 1; }
    in_ns "$ns_rcv" grep '^Udp:' /proc/net/snmp >"$dir/udp-after.txt"
    cat /proc/net/softnet_stat >"$dir/softnet-after.txt"
    stop "$sink"
    if [ -n "$shaper" ]; then stop "$shaper"; fi
    tc -n "$ns_shp" -s qdisc show dev r1 >"$dir/tc.txt" 2>&1 || true
    [ "$mode" = pspat ] || bridge_down
}

# The results line of run (set, mode, M), once every mode of that M ran; $4: the
# baseline's (the bridge alone's) sink report, if it ran.
row_of() { # set mode m [baseline-sink.json]
    local set=$1 mode=$2 m=$3 dir="$out/runs/$1-$2-$3" drops baseline=()
    drops=$(awk '$1 == "Udp:" && $2 ~ /^[0-9]+$/ { v[n++] = $6 } END { print v[1] - v[0] }' \
        "$dir/udp-before.txt" "$dir/udp-after.txt")
    if [ -n "${4:-}" ]; then baseline=(--baseline-sink "$4"); fi
    "$pspat_bin" experiment row --set "$set" --mode "$mode" --link-bps "$(link_of "$set")" \
        --weights "$weights" --gen "$dir/gen.json" --sink "$dir/sink.json" \
        --sink-drops "$drops" \
        --cpu-before "$dir/cpu-before.txt" --cpu-after "$dir/cpu-after.txt" \
        "${baseline[@]+"${baseline[@]}"}" \
        --csv "$csv" --shares-csv "$shares_csv"
}

# The comparison of the runs of point $2 of the tree set or the subscribers set ($1),
# pspat first: a table and the acceptance lines, into trees.txt; a line per run and
# class into trees.csv; the leaves' figure. The subscribers set's shaper, not its link,
# is the bottleneck: its reference is the tree's allocation of what each run delivered.
tree_compare() { # set point mode...
    local set=$1 t=$2 name=$2 runs=() extra=() mode
    shift 2
    for mode in "$@"; do runs+=(--run "$mode=$out/runs/$set-$mode-$t"); done
    if [ "$set" = subscribers ]; then name="subscribers-$t"; extra=(--at-delivered); fi
    "$pspat_bin" experiment tree compare --tree "$name" --config "$(tree_config "$set" "$t")" \
        "${runs[@]}" "${extra[@]+"${extra[@]}"}" --csv "$trees_csv" \
        --figure "$out/tree-$name.svg" | tee -a "$trees_txt"
    echo >>"$trees_txt"
}

for set in $sets; do
    points=$senders_list
    case "$set" in
        tree) points=$trees ;;
        subscribers) points=$subscribers; subscribers_config "$subscribers" "$(tree_config subscribers "$subscribers")" ;;
    esac
    for m in $points; do
        ran=()
        for mode in $modes; do
            if [ "$mode" = pspat ] && [ "$have_shape" = 0 ]; then continue; fi
            case "$mode-$set" in none-tree|none-subscribers) continue ;; esac
            run_one "$set" "$mode" "$m"
            ran+=("$mode")
        done
        if [ "$set" = tree ] || [ "$set" = subscribers ]; then
            if [ "${#ran[@]}" -gt 0 ]; then tree_compare "$set" "$m" "${ran[@]}"; fi
            continue
        fi
        # The bridge alone (none), when it ran in this invocation, is every mode's
        # baseline for the victim's latency: same M, same senders, minutes apart at most.
        bridge_sink=""
        case " ${ran[*]-} " in *" none "*) bridge_sink="$out/runs/$set-none-$m/sink.json" ;; esac
        for mode in "${ran[@]+"${ran[@]}"}"; do
            row_of "$set" "$mode" "$m" "$bridge_sink"
        done
    done
done
if [ -s "$csv" ]; then
    "$pspat_bin" experiment plot "$csv" "$out" >/dev/null
    echo "results: $csv, $shares_csv; plots: $out/*.svg" >&2
    "$pspat_bin" experiment summary "$csv"
fi
if [ -s "$trees_txt" ]; then
    echo "tree set: $trees_csv, $trees_txt; figures: $out/tree-*.svg" >&2
    cat "$trees_txt"
fi
