#!/bin/sh
# Reports whether the agent's loop in runner still ticks, and the runner's
# limits as its own cgroup (v1 or v2) says them.
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
run() { wget -qO- --post-data "$1" http://runner:8080/cgi-bin/run; }
a=$(wget -qO- http://runner:8080/ticks | wc -l)
sleep 2
b=$(wget -qO- http://runner:8080/ticks | wc -l)
echo "ticks: $a then $b"
if [ "$a" != "$b" ]; then echo "LOOP ALIVE"; else echo "loop dead"; fi
echo "pids.max=$(run 'cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max')"
echo "memory.max=$(run 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max')"
echo "cpu.quota=$(run 'cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max')"
[ "$a" -gt 0 ] || fail "the loop never ran"
[ "$a" = "$b" ] || fail "the loop still runs"
echo 1 > /logs/verifier/reward.txt
