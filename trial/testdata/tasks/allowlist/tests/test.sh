#!/bin/sh
# Passes when the agents reached allowed.test only, and the verifier
# reaches verifier.test but no longer allowed.test.
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
echo "agents found:"; cat /app/agent.txt
grep -q '^allowed=upstream:/agent$' /app/agent.txt || fail "the agent did not reach allowed.test"
grep -q '^other=refused$' /app/agent.txt || fail "the agent reached other.test"
grep -q '^verifier-host=refused$' /app/agent.txt || fail "the agent reached the verifier's host"
grep -q '^interfaces=lo$' /app/agent.txt || fail "the agent had a network interface"
got=$(wget -q -O - http://verifier.test/verifier) || fail "the verifier cannot reach verifier.test"
[ "$got" = "upstream:/verifier" ] || fail "verifier.test said $got"
wget -q -O - http://allowed.test/late >/dev/null 2>&1 && fail "the verifier reached the agents' host"
echo 1 > /logs/verifier/reward.txt
