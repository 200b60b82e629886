#!/bin/sh
# Passes when the agent wrote its result; the artifacts are collected after.
test -f /app/out/result.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
