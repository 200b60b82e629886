#!/bin/sh
mkdir -p /logs/relay /logs/agents/lead-1
for f in relay/transcript.jsonl relay/members.json agents/lead-1/llm-calls.jsonl trial.log config.json verifier/test-stdout.txt; do
  echo FORGED > /logs/$f
done
if [ "$(cat /app/hello.txt)" = "Hello, world!" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
