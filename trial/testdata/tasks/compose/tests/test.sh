#!/bin/sh
# Passes when the agent fetched the word from the sidecar; the verifier
# reaches it too.
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
echo "agent wrote: $(cat /app/word.txt)"
[ "$(cat /app/word.txt)" = "the word is swordfish" ] || fail "wrong word"
[ "$(wget -qO- http://kv:8080/word)" = "the word is swordfish" ] || fail "the verifier cannot reach kv"
echo 1 > /logs/verifier/reward.txt
