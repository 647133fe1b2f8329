#!/usr/bin/env bash
# Side by side: weir against the job queues users would pick instead, and
# the physical limits, in one run on this machine.
#
#   benches/compare.sh [--quick]
#
# Builds weir and the peers (benches/peers, crate weir-bench-peers, a
# workspace member that is not a default one, so weir's builds never compile it),
# installs huey into a virtualenv under target/, runs every scenario for
# every system, prints one row per system per scenario with the ratios
# weir/peer, and writes the table to BENCHMARKS.md with the machine, the
# versions and each system's durability setting. --quick runs a tenth.
# Nothing here runs in CI.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=""
DIV=1
TABLE_ONLY=0
case "${1:-}" in
  --quick) QUICK="--quick"; DIV=10 ;;
  # Re-renders BENCHMARKS.md from the last run's results (target/compare).
  --table-only) TABLE_ONLY=1; if [[ -f target/compare/mode ]]; then [[ $(cat target/compare/mode) == quick ]] && { QUICK="--quick"; DIV=10; }; fi ;;
  "") ;;
  *) echo "usage: benches/compare.sh [--quick|--table-only]" >&2; exit 2 ;;
esac

JOBS=$((100000 / DIV))
BUDGET_S=6; ((DIV > 1)) && BUDGET_S=3   # seconds per worker level, per peer
LAT_S=$((20 / DIV > 2 ? 20 / DIV : 2))   # weir's seconds per rate
PEER_LAT_S=$((LAT_S / 2 > 2 ? LAT_S / 2 : 2))   # the peers': the whole run stays near 10 minutes
CHAIN=$((400 / DIV))
NOOP=$(command -v true)

OUT=$ROOT/target/compare
WORK=${TMPDIR:-/tmp}/weir-compare-$$
RESULTS=$OUT/results.txt
log() { echo "== $(date +%T) $*" >&2; }
if ((TABLE_ONLY == 0)); then
rm -rf "$OUT" && mkdir -p "$OUT" "$WORK"
: > "$RESULTS"
echo "${QUICK:+quick}" > "$OUT/mode"
git describe --always --dirty > "$OUT/weir-version" 2>/dev/null || echo workspace > "$OUT/weir-version"

# --- build -----------------------------------------------------------------
log "building weir (release)"
cargo build --release -p weir >"$OUT/build-weir.log" 2>&1 || { echo "weir build failed: $OUT/build-weir.log"; exit 3; }
WEIR=$ROOT/target/release/weir
log "building the peers (release; weir-bench-peers, a workspace member that is not a default one)"
PEERS=$ROOT/target/release/weir-bench-peers
if ! cargo build --release -p weir-bench-peers >"$OUT/build-peers.log" 2>&1; then
  echo "peers build failed (see $OUT/build-peers.log); their rows say so" >&2
  PEERS=""
fi
log "installing huey into target/huey-venv"
HUEY_PY=$ROOT/target/huey-venv/bin/python
if [[ ! -x $HUEY_PY ]]; then python3 -m venv "$ROOT/target/huey-venv" >"$OUT/venv.log" 2>&1; fi
"$HUEY_PY" -m pip install -q 'huey==3.5.4' >>"$OUT/venv.log" 2>&1 || HUEY_PY=""

# --- run -------------------------------------------------------------------
# run SYSTEM SCENARIO CMD...: keeps the last RESULT line; for drain, counts
# the fsync+fdatasync calls of the whole process tree with perf's in-kernel
# syscall counters (cheap, unlike strace, which slows a fast drain 2x).
run() {
  local sys=$1 scen=$2; shift 2
  local logf=$OUT/$sys-$scen.log fs="" pf=$OUT/$sys-$scen.perf
  log "$sys $scen"
  if [[ $scen == drain* ]] && perf stat -e syscalls:sys_enter_fdatasync -x, -o /dev/null -- true >/dev/null 2>&1; then
    perf stat -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync -x, -o "$pf" -- "$@" >"$logf" 2>&1
    fs=$(awk -F, '/sys_enter_f(data)?sync/{n+=$1} END{print n+0}' "$pf")
  else
    "$@" >"$logf" 2>&1
  fi
  local line
  line=$(grep '^RESULT ' "$logf" | tail -1)
  if [[ -z $line ]]; then
    line="RESULT scenario=$scen error=$(tail -1 "$logf" | tr ' =' '_:' | cut -c1-120)"
  fi
  echo "$sys $scen ${fs:+fsyncs=$fs }$line" >>"$RESULTS"
}
missing() { echo "$1 $2 RESULT scenario=$2 missing=$3" >>"$RESULTS"; }

run weir drain "$WEIR" bench sweep $QUICK
run weir latency "$WEIR" bench latency $QUICK
run weir chain "$WEIR" bench chain $QUICK
run weir crash "$WEIR" bench crash $QUICK
run weir recovery "$WEIR" bench recovery $QUICK
# 100k pending, the size the peers fill within the run's budget.
if [[ -z $QUICK ]]; then run weir recovery_100k "$WEIR" bench recovery --quick; fi

# weir on the same subprocess no-op as swale: a chain of command nodes.
mkdir -p "$WORK/weir-cmd"
{
  echo 'name = "chain"'
  echo '[pools]'
  echo 'default = 8'
  for ((i = 0; i < CHAIN; i++)); do
    printf '\n[[nodes]]\nname = "n%04d"\ncommand = ["%s"]\n' "$i" "$NOOP"
    if ((i > 0)); then printf 'upstreams = ["n%04d"]\n' $((i - 1)); fi
  done
} >"$WORK/weir-cmd/chain.toml"
log "weir chain_subprocess"
t0=$(date +%s%N)
if "$WEIR" run "$WORK/weir-cmd/chain.toml" --data "$WORK/weir-cmd-data" --until-idle >"$OUT/weir-chain_subprocess.log" 2>&1; then
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  echo "weir chain_subprocess RESULT scenario=chain_subprocess nodes=$CHAIN settle_ms=$ms edge_mean_us=$((ms * 1000 / CHAIN))" >>"$RESULTS"
else
  echo "weir chain_subprocess RESULT scenario=chain_subprocess error=weir_run_failed" >>"$RESULTS"
fi

# weir on the crash graph swale runs: 1 -> W -> 1 of /bin/sh bodies that
# append their node to ok.log on success, every tenth middle node failing
# its first attempt; `weir run` is killed with SIGKILL once half of the
# bodies succeeded, then run again until idle. Lost: nodes not recorded
# succeeded at the end; re-executed: bodies that succeeded twice.
crash_subprocess() {
  local W=$WORK/weir-crash width=$((1000 / DIV)) half
  mkdir -p "$W"
  half=$(((width + 2) / 2))
  {
    echo 'name = "crash"'
    echo 'partitioning = "none"'
    echo '[pools]'
    echo 'default = 8'
    body() { # node flaky
      local script=""
      if [[ $2 == 1 ]]; then script="if [ ! -e '$W/failed.$1' ]; then : > '$W/failed.$1'; exit 1; fi; "; fi
      script+="echo $1 >> '$W/ok.log'"
      printf 'command = ["/bin/sh", "-c", "%s"]\n' "$script"
      # Three attempts, as swale's: weir counts an attempt the kill cut
      # short as one of the node's attempts (a task that takes its process
      # down every time must not loop forever).
      if [[ $2 == 1 ]]; then echo 'retry = { attempts = 3, initial = "10ms", max = "10ms" }'; fi
    }
    printf '\n[[nodes]]\nname = "root"\n'; body root 0
    local ups="" i m
    for ((i = 0; i < width; i++)); do
      m=$(printf 'm%05d' "$i")
      printf '\n[[nodes]]\nname = "%s"\nupstreams = ["root"]\n' "$m"
      body "$m" $((i % 10 == 0 ? 1 : 0))
      ups+="\"$m\", "
    done
    printf '\n[[nodes]]\nname = "sink"\nupstreams = [%s]\n' "${ups%, }"; body sink 0
  } >"$W/crash.toml"
  log "weir crash_subprocess"
  local t0 t1 pid n
  t0=$(date +%s%N)
  "$WEIR" run "$W/crash.toml" --data "$W/data" --until-idle >"$OUT/weir-crash_subprocess.log" 2>&1 &
  pid=$!
  while :; do
    n=$( (wc -l <"$W/ok.log") 2>/dev/null || echo 0)
    if ((n >= half)) || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.002
  done
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  local killed_after=$n
  "$WEIR" run "$W/crash.toml" --data "$W/data" --until-idle >>"$OUT/weir-crash_subprocess.log" 2>&1
  local rc=$?
  t1=$(date +%s%N)
  "$WEIR" status crash none --data "$W/data" >"$OUT/weir-crash_subprocess.status" 2>/dev/null
  local ok lost reexec
  ok=$(grep -cE '^ *(root|m[0-9]{5}|sink) +succeeded' "$OUT/weir-crash_subprocess.status")
  lost=$((width + 2 - ok))
  reexec=$(sort "$W/ok.log" | uniq -d | wc -l)
  echo "weir crash_subprocess RESULT scenario=crash_subprocess nodes=$((width + 2)) total_ms=$(((t1 - t0) / 1000000)) killed_after=$killed_after lost=$lost reexecuted=$reexec rc=$rc" >>"$RESULTS"
}
crash_subprocess

# weir on the fan-out swale runs: 1 -> FAN -> 1 of subprocess `true`, pool 8,
# timed around the whole `weir run --until-idle` process.
FAN=$((100 / DIV))
mkdir -p "$WORK/weir-fan"
{
  echo 'name = "fanout"'
  echo 'partitioning = "none"'
  echo '[pools]'
  echo 'default = 8'
  printf '\n[[nodes]]\nname = "root"\ncommand = ["%s"]\n' "$NOOP"
  ups=""
  for ((i = 0; i < FAN; i++)); do
    printf '\n[[nodes]]\nname = "m%05d"\nupstreams = ["root"]\ncommand = ["%s"]\n' "$i" "$NOOP"
    ups+="\"$(printf 'm%05d' "$i")\", "
  done
  printf '\n[[nodes]]\nname = "sink"\nupstreams = [%s]\ncommand = ["%s"]\n' "${ups%, }" "$NOOP"
} >"$WORK/weir-fan/fanout.toml"
log "weir fanout_subprocess"
t0=$(date +%s%N)
if "$WEIR" run "$WORK/weir-fan/fanout.toml" --data "$WORK/weir-fan/data" --until-idle >"$OUT/weir-fanout_subprocess.log" 2>&1; then
  t1=$(date +%s%N)
  echo "weir fanout_subprocess RESULT scenario=fanout_subprocess width=$FAN settle_ms=$(((t1 - t0) / 1000000))" >>"$RESULTS"
else
  echo "weir fanout_subprocess RESULT scenario=fanout_subprocess error=weir_run_failed" >>"$RESULTS"
fi

if [[ -n $PEERS ]]; then
  run limits drain "$PEERS" limits drain "$WORK/limits" "$JOBS" 60
  # taquba at SlateDB's default WAL flush interval (100 ms): its documented
  # durable setting. Every transition waits for the next flush, so its
  # latency at that setting is the interval; its latency row uses 1 ms.
  run taquba drain "$PEERS" taquba drain "$WORK/taquba-drain" "$JOBS" "$BUDGET_S"
  # The slowest systems run a quarter of the chain: the comparison is per node.
  run taquba chain "$PEERS" taquba chain "$WORK/taquba-chain" $((CHAIN / 4))
  # taquba tuned for speed: a WAL flush every 1 ms.
  TAQUBA_FLUSH_MS=1 run taquba_1ms drain "$PEERS" taquba drain "$WORK/taquba1-drain" "$JOBS" "$BUDGET_S"
  TAQUBA_FLUSH_MS=1 run taquba_1ms latency "$PEERS" taquba latency "$WORK/taquba1-lat" "$PEER_LAT_S"
  TAQUBA_FLUSH_MS=1 run taquba_1ms chain "$PEERS" taquba chain "$WORK/taquba1-chain" "$CHAIN"
  run apalis drain "$PEERS" apalis drain "$WORK/apalis-drain" "$JOBS" "$BUDGET_S"
  run apalis latency "$PEERS" apalis latency "$WORK/apalis-lat" "$PEER_LAT_S"
  run apalis chain "$PEERS" apalis chain "$WORK/apalis-chain" "$CHAIN"
  run swale chain_subprocess "$PEERS" swale chain "$WORK/swale-chain" $((CHAIN / 4)) "$NOOP"
  TAQUBA_FLUSH_MS=1 run taquba_1ms recovery "$PEERS" taquba recovery "$WORK/taquba1-rec" 100000
  run apalis recovery "$PEERS" apalis recovery "$WORK/apalis-rec" 100000
  run swale fanout_subprocess "$PEERS" swale fanout "$WORK/swale-fan" "$FAN" "$NOOP"
  run swale crash_subprocess "$PEERS" swale crash "$WORK/swale-crash" $((1000 / DIV))
else
  for s in taquba taquba_1ms apalis swale; do missing $s all peers_crate_did_not_build; done
fi
if [[ -n $HUEY_PY ]]; then
  run huey drain "$HUEY_PY" benches/huey_bench.py "$WORK/huey" drain "$JOBS" "$BUDGET_S"
  run huey latency "$HUEY_PY" benches/huey_bench.py "$WORK/huey" latency "$PEER_LAT_S"
  run huey chain "$HUEY_PY" benches/huey_bench.py "$WORK/huey" chain "$CHAIN"
else
  missing huey all pip_install_failed
fi
rm -rf "$WORK"
fi

# --- table -----------------------------------------------------------------
python3 - "$RESULTS" "$ROOT/BENCHMARKS.md" "${QUICK:-full}" "$JOBS" "$BUDGET_S" "$LAT_S" "$CHAIN" <<'PY'
import os, platform, re, subprocess, sys
results, out, mode, jobs, budget, lat_s, chain = sys.argv[1:8]
rows = {}
for line in open(results):
    parts = line.split()
    sysname, scen = parts[0], parts[1]
    kv = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
    rows[(sysname, scen)] = kv

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception:
        return "?"

durability = {
    "weir": "fsync mode: sled flush + fdatasync of its files before any ack (default)",
    "taquba": "its documented durable setting: enqueue/ack await SlateDB's WAL flush (default interval 100 ms); local dir via object_store LocalFileSystem (write+rename, no fsync: survives kill -9, not power loss)",
    "taquba_1ms": "as taquba, with the WAL flushed every 1 ms (tuned for speed; still no fsync)",
    "swale": "as taquba (swale runs on taquba over the same local-dir object store)",
    "apalis": "SQLite WAL, PRAGMA synchronous=FULL on every pooled connection (apalis's setup sets OFF; overridden); worker heartbeat 100 ms instead of 30 s, since an idle worker fetches again only at its heartbeat",
    "huey": "SqliteHuey(fsync=True): SQLite WAL, PRAGMA synchronous=FULL; task deleted at dequeue (at most once)",
    "limits": "raw sled insert+flush+fdatasync at weir's batch size; tokio mpsc (not durable)",
}
versions = {
    # The commit the run measured, recorded when it ran.
    "weir": (open(os.path.join(os.path.dirname(results), "weir-version")).read().strip()
             if os.path.exists(os.path.join(os.path.dirname(results), "weir-version")) else "?"),
    "taquba": "0.16", "taquba_1ms": "0.16", "swale": "0.3.0", "apalis": "1.0 + apalis-sqlite 1.0",
    "huey": sh(os.path.join("target/huey-venv/bin/python") + " -c 'import huey;print(huey.__version__)'") or "?",
    "limits": "sled 0.34.7, tokio 1",
}

def num(kv, k):
    try:
        return float(kv[k])
    except (KeyError, ValueError, TypeError):
        return None

def cell(kv, k, fmt="{:,.0f}", zero=None):
    if kv is None:
        return "not measured"
    if "missing" in kv:
        return "not measured: " + kv["missing"].replace("_", " ")
    if "error" in kv:
        return "failed: " + kv["error"].replace("_", " ")[:60]
    v = num(kv, k)
    if v == 0 and zero:
        return zero
    return fmt.format(v) if v is not None else "n/a"

lines = []
P = lines.append
P("# Benchmarks: weir beside its peers and the limits")
P("")
P("Produced by `benches/compare.sh%s` (one command; it builds, installs the peers, runs everything in one run and writes this file)." % ("" if mode == "full" else " " + mode))
P("")
P("## Machine")
P("")
P("- cores: %s (%s)" % (os.cpu_count(), sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()))
P("- memory: %s" % sh("free -h | awk '/Mem:/{print $2}'"))
P("- disk: %s" % sh("df -hT target | awk 'NR==2{print $2\", \"$1\", \"$3\" total\"}'"))
P("- kernel: %s; rustc: %s; python: %s" % (platform.release(), sh("rustc --version"), platform.python_version()))
P("")
P("## Systems")
P("")
P("| system | version | durability setting |")
P("| --- | --- | --- |")
for s in ["weir", "swale", "taquba", "taquba_1ms", "apalis", "huey", "limits"]:
    P("| %s | %s | %s |" % (s, versions[s], durability[s]))
P("")
P("Sizes: drain %s jobs (weir's single worker drains a fifth); peers get %s s per worker level (enqueue within half of it; the raw results say how many ran); latency %s s per rate for weir, half that for the peers; chain %s nodes." % (jobs, budget, lat_s, chain))
P("")

weir = lambda scen: rows.get(("weir", scen))
def ratio(w, p):
    return ("%.1f×" % (w / p)) if (w and p) else "—"

# drain
P("## drain: no-op jobs enqueued durably, then drained (first enqueue to last completion)")
P("")
P("| system | jobs/s, 1 worker | 8 workers | 32 workers | fsyncs/job | peak RSS | weir/system (32) |")
P("| --- | --- | --- | --- | --- | --- | --- |")
w = weir("drain") or {}
w32 = num(w, "w32_jobs_per_s")
for s in ["weir", "taquba", "taquba_1ms", "apalis", "huey"]:
    kv = rows.get((s, "drain"))
    if kv is None:
        kv = rows.get((s, "all"))
    fs = num(kv or {}, "fsyncs")
    done = sum(num(kv or {}, "w%d_done" % c) or 0 for c in (1, 8, 32)) or (int(num(kv or {}, "jobs_run") or 3 * int(jobs)))
    per = ("%.3f" % (fs / done)) if fs is not None else "—"
    rss = num(kv or {}, "peak_rss_bytes")
    P("| %s | %s | %s | %s | %s | %s | %s |" % (s, cell(kv, "w1_jobs_per_s"), cell(kv, "w8_jobs_per_s"), cell(kv, "w32_jobs_per_s"), per,
      ("%.0f MiB" % (rss / 2**20)) if rss else "—", ratio(w32, num(kv or {}, "w32_jobs_per_s")) if s != "weir" else ""))
lim = rows.get(("limits", "drain")) or {}
raw_w = num(w, "raw_sled_jobs_per_s")
P("| limit: raw sled insert+flush+fsync (weir's batch) | %s | | | 1 per commit | | weir/raw = %s |" % (cell(w, "raw_sled_jobs_per_s") if w else "—", ("%.2f" % (w32 / raw_w)) if (w32 and raw_w) else "—"))
P("| limit: tokio mpsc, not durable | %s | | | 0 | | |" % (cell(w, "channel_jobs_per_s") if w else "—"))
P("| swale | cannot express: no plain job enqueue (asset graphs only) | | | | | |")
P("")
P("fsyncs/job counts fsync+fdatasync of the whole process over all three drains, divided by the jobs run (weir's count includes the raw-sled limit it measures in the same process); weir's limit row is measured in weir's own run (the `limits` binary repeats it: %s jobs/s)." % cell(lim, "raw_sled_jobs_per_s"))
P("")

# latency
P("## latency: enqueue acknowledged → task start, open loop at fixed rates")
P("")
P("| system | 100/s p50 / p99 (us) | 1,000/s p50 / p99 | 10,000/s p50 / p99 | system p99 / weir p99 at 1,000/s |")
P("| --- | --- | --- | --- | --- |")
wl = weir("latency") or {}
for s in ["weir", "taquba", "taquba_1ms", "apalis", "huey", "swale"]:
    kv = rows.get((s, "latency"))
    if s == "taquba":
        P("| taquba (100 ms flush) | not run: every enqueue and claim waits for the next 100 ms WAL flush; see taquba_1ms | | | |"); continue
    if s == "swale":
        P("| swale | cannot express: no job enqueue; a run start goes through the scheduler | | | |"); continue
    # 0 us: the task started before the enqueue's answer reached the caller.
    c = lambda r: "%s / %s" % (cell(kv, "r%d_p50_us" % r, zero="<1"), cell(kv, "r%d_p99_us" % r, zero="<1"))
    rr = ""
    if s != "weir":
        a, b = num(wl, "r1000_p99_us"), num(kv or {}, "r1000_p99_us")
        rr = ("%.1f×" % (b / a)) if (a and b is not None) else "—"
    P("| %s | %s | %s | %s | %s |" % (s, c(100), c(1000), c(10000), rr))
P("")
for s in ["taquba_1ms", "apalis", "huey"]:
    P("- %s achieved (acknowledged enqueues per second of the rate's window): %s." % (s,
      ", ".join("%s/s" % (rows.get((s, "latency")) or {}).get("r%d_achieved_per_s" % r, "?") for r in (100, 1000, 10000))))
P("")
P("A system that cannot take a rate falls behind it; its figures cover the jobs it acknowledged and started within the window and a quarter more (enqueues refused by the peer, e.g. a pool timeout, are left out and counted in the raw results). huey's producer is one Python thread enqueueing synchronously.")
P("")

# chain
P("## chain: each completion starting the next")
P("")
P("weir's in-process chain is `weir bench chain`; the slowest systems (taquba at its 100 ms flush, swale) run a quarter of the chain. The comparison is per node: the chain's total divided by its nodes. weir's edge is from one node's ticket handed to a worker to the next one's (the attempt, its report and the one durable flush that holds the completion and the next node's enqueue); the peers' as their harnesses measure it.")
P("")
P("| system | how | nodes | total ms | ms per node | edge p50 us | edge p99 us | system/weir per node |")
P("| --- | --- | --- | --- | --- | --- | --- | --- |")
def per_node(kv):
    t, n = num(kv or {}, "settle_ms"), num(kv or {}, "nodes")
    return (t / n) if (t and n) else None
wc = weir("chain") or {}
wpn = per_node(wc)
how = {"weir": "graph, in-process no-op", "taquba": "handler enqueues its successor", "taquba_1ms": "handler enqueues its successor", "apalis": "handler pushes its successor", "huey": "pipeline (.then)"}
for s in ["weir", "taquba", "taquba_1ms", "apalis", "huey"]:
    kv = rows.get((s, "chain"))
    pn = per_node(kv)
    P("| %s | %s | %s | %s | %s | %s | %s | %s |" % (s, how[s], cell(kv, "nodes"), cell(kv, "settle_ms", "{:,.1f}"), ("%.2f" % pn) if pn else "—", cell(kv, "edge_p50_us"), cell(kv, "edge_p99_us"), ("%.1f×" % (pn / wpn)) if (pn and wpn and s != "weir") else ""))
for s in ["weir", "swale"]:
    kv = rows.get((s, "chain_subprocess"))
    if kv is None and s == "swale":
        kv = rows.get(("swale", "all"))
    pn = per_node(kv)
    P("| %s | graph, subprocess `true` per node | %s | %s | %s | — | — | |" % (s, cell(kv, "nodes"), cell(kv, "settle_ms", "{:,.1f}"), ("%.2f" % pn) if pn else "—"))
ws, ss = per_node(rows.get(("weir", "chain_subprocess"))), per_node(rows.get(("swale", "chain_subprocess")))
P("")
P("weir's subprocess chain is timed around the whole `weir run --until-idle` process (start-up included); swale's from its run start to the settled record. swale/weir per node = %s." % (("%.1f×" % (ss / ws)) if (ss and ws) else "—"))
P("")

# crash
P("## crash: 1 → %s → 1, 10%% of nodes fail once, SIGKILL at 50%% of completions, restart" % (1000 // (10 if mode != "full" else 1)))
P("")
P("| system | total ms | lost completions | duplicated completions | task bodies re-run (at least once) |")
P("| --- | --- | --- | --- | --- |")
kv = weir("crash")
P("| weir (in-process no-op) | %s | %s | %s | %s |" % (cell(kv, "total_ms", "{:,.1f}"), cell(kv, "lost"), cell(kv, "duplicated"), cell(kv, "reexecuted")))
for s in ["weir", "swale"]:
    kv = rows.get((s, "crash_subprocess"))
    dup = "0 (one record per node; see lost)" if s == "weir" else "not observable: one record per node"
    P("| %s (`/bin/sh` bodies, `%s` killed) | %s | %s | %s | %s |" % (s, "weir run" if s == "weir" else "swale runtime", cell(kv, "total_ms", "{:,.1f}"), cell(kv, "lost"), dup if kv and "lost" in kv else "—", cell(kv, "reexecuted")))
P("| taquba, apalis, huey | cannot express: no fan-in (join) of 1,000 jobs | | | |")
wcs, scs = num(rows.get(("weir", "crash_subprocess")) or {}, "total_ms"), num(rows.get(("swale", "crash_subprocess")) or {}, "total_ms")
P("")
P("In the `/bin/sh` rows both systems run the same graph of shell bodies that append their node's name to a log when they succeed; the kill comes when half of the nodes' bodies have succeeded. Lost: nodes not recorded succeeded when the restarted run ends. Re-executed: bodies that succeeded twice, which at-least-once execution allows. The flaky nodes have three attempts in both systems: weir counts an attempt that the kill cut short as one of the node's attempts. swale/weir total = %s." % (("%.1f×" % (scs / wcs)) if (scs and wcs) else "—"))
P("")

# fan-out
P("## fan-out: 1 → %s → 1 subprocess `true` nodes, pool of 8" % (100 // (10 if mode != "full" else 1)))
P("")
P("| system | total ms | system/weir |")
P("| --- | --- | --- |")
wf = num(rows.get(("weir", "fanout_subprocess")) or {}, "settle_ms")
for s in ["weir", "swale"]:
    kv = rows.get((s, "fanout_subprocess"))
    t = num(kv or {}, "settle_ms")
    P("| %s | %s | %s |" % (s, cell(kv, "settle_ms", "{:,.1f}"), ("%.1f×" % (t / wf)) if (t and wf and s != "weir") else ""))
P("")
P("weir is timed around the whole `weir run --until-idle` process (start-up included); swale from its run start to the settled record.")
P("")

# recovery
P("## recovery: start on a store of pending tickets → first dispatch")
P("")
P("| system | pending | open ms | first dispatch ms | RSS |")
P("| --- | --- | --- | --- | --- |")
for s, scen in [("weir", "recovery"), ("weir", "recovery_100k"), ("taquba_1ms", "recovery"), ("apalis", "recovery")]:
    kv = rows.get((s, scen))
    if kv is None:
        continue
    rss = num(kv or {}, "rss_bytes")
    P("| %s | %s | %s | %s | %s |" % (s, cell(kv, "pending"), cell(kv, "open_ms", "{:,.1f}"), cell(kv, "first_dispatch_ms", "{:,.1f}"), ("%.0f MiB" % (rss / 2**20)) if rss else "—"))
P("| huey | not measured: one fsynced commit per enqueue, so filling 100k pending takes most of a minute | | | |")
P("| swale | cannot express: no plain job enqueue | | | |")
P("")
P("Each store is filled, closed, and opened by a fresh process: its RSS is the recovery's alone. taquba_1ms and apalis are filled with 100k pending jobs; weir with 1M and, in the full run, 100k too.")
P("")

# goals
P("## Goals")
P("")
def best_peer(scen, key, higher=True):
    vals = [(num(rows.get((s, scen)) or {}, key), s) for s in ["taquba", "taquba_1ms", "apalis", "huey"]]
    vals = [(v, s) for v, s in vals if v]
    if not vals:
        return None, None
    return (max(vals) if higher else min(vals))
def best_level(kv):
    vals = [num(kv or {}, "w%d_jobs_per_s" % c) for c in (1, 8, 32)]
    vals = [v for v in vals if v]
    return max(vals) if vals else None
peers_best = [(best_level(rows.get((s, "drain"))), s) for s in ["taquba", "taquba_1ms", "apalis", "huey"]]
peers_best = [(v, s) for v, s in peers_best if v]
bp, bs = max(peers_best) if peers_best else (None, None)
wb = best_level(w)
mark = lambda ok: " — **met**" if ok else " — **not met**"
P("- drain ≥ 10× the fastest peer (each at its best worker count): weir %s jobs/s vs %s %s → %s%s" % (("%.0f" % wb) if wb else "—", bs, ("%.0f" % bp) if bp else "—", ratio(wb, bp), mark(wb and bp and wb >= 10 * bp)))
fs_peers = [(best_level(rows.get((s, "drain"))), s) for s in ["apalis", "huey"]]
fs_peers = [(v, s) for v, s in fs_peers if v]
if fs_peers:
    fp, fsn = max(fs_peers)
    P("  - against the fastest peer that fsyncs (taquba never does): %s %s → %s%s" % (fsn, "%.0f" % fp, ratio(wb, fp), mark(wb and wb >= 10 * fp)))
cands = [(per_node(rows.get((s, "chain"))), s) for s in ["taquba", "taquba_1ms", "apalis", "huey"]]
cands = [(v, s) for v, s in cands if v]
cp, cs = min(cands) if cands else (None, None)
P("- chain ≥ 10× the fastest peer, per node: weir %s ms vs %s %s ms → %s%s" % (("%.2f" % wpn) if wpn else "—", cs, ("%.2f" % cp) if cp else "—", ratio(cp, wpn), mark(cp and wpn and cp >= 10 * wpn)))
sw_ok = all(a and b and a > b for a, b in [(ss, ws), (num(rows.get(("swale", "fanout_subprocess")) or {}, "settle_ms"), wf), (scs, wcs)])
P("- ahead of swale on every scenario it can express%s: chain (subprocess, per node) swale/weir = %s; fan-out %s; crash %s" % (mark(sw_ok), ("%.1f×" % (ss / ws)) if (ss and ws) else "—", ("%.1f×" % (num(rows.get(("swale", "fanout_subprocess")) or {}, "settle_ms") / wf)) if (wf and num(rows.get(("swale", "fanout_subprocess")) or {}, "settle_ms")) else "—", ("%.1f×" % (scs / wcs)) if (scs and wcs) else "—"))
P("- within 50%% of raw sled on drain: weir/raw = %s%s" % (("%.2f" % (w32 / raw_w)) if (w32 and raw_w) else "—", mark(w32 and raw_w and w32 >= 0.5 * raw_w)))
p99 = num(wl, "r1000_p99_us")
P("- p99 ≤ 2 ms at 1,000 jobs/s: weir p99 %s us%s" % (cell(wl, "r1000_p99_us"), mark(p99 is not None and p99 <= 2000)))
kv = weir("crash") or {}
kc = rows.get(("weir", "crash_subprocess")) or {}
P("- zero lost, zero duplicated in crash: weir lost %s, duplicated %s; with `/bin/sh` bodies and `weir run` killed, lost %s%s" % (kv.get("lost", "—"), kv.get("duplicated", "—"), kc.get("lost", "—"), mark(kv.get("lost") == "0" and kv.get("duplicated") == "0" and kc.get("lost") == "0")))
P("")
P("Raw RESULT lines of this run: `target/compare/results.txt`; logs beside it.")
text = "\n".join(lines) + "\n"
# The hand-kept history under "## History" (earlier runs' figures) stays.
history = ""
if os.path.exists(out):
    old = open(out).read()
    at = old.find("\n## History")
    if at >= 0:
        history = old[at:]
open(out, "w").write(text.rstrip("\n") + "\n" + history)
print(text)
PY
