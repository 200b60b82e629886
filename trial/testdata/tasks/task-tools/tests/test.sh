#!/bin/sh
# Passes when the agent called the task's MCP tool (its server left the call
# in /app/mcp-call.json) and read the skill copied for it.
mkdir -p /logs/verifier
if grep -q '"name":"lookup","arguments":{"key":"word"}' /app/mcp-call.json && grep -q 'name: greet' /app/skill.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
