#!/bin/sh
# Passes when the agents had loopback only and the verifier has a network
# interface with a route out.
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
echo "agents found:"; cat /app/agent.txt
grep -q '^interfaces=lo$' /app/agent.txt || fail "the agents had a network"
ifaces=$(ls /sys/class/net | tr '\n' ' ')
echo "verifier interfaces: $ifaces"; ip route
case "$ifaces" in *eth0*) ;; *) fail "the verifier has no network: $ifaces" ;; esac
ip route | grep -q '^default' || fail "the verifier has no route out"
echo 1 > /logs/verifier/reward.txt
