#!/bin/sh
# Passes when the agent ran as "agent" in /work with the task's env, and the
# verifier runs as "checker" in /work.
echo "agent wrote:"; cat /app/agent.txt
echo "verifier: $(whoami) in $(pwd)"
want="agent
2000
/work
hi $TROUPE_EXPECT"
if [ "$(cat /app/agent.txt)" = "$want" ] && [ "$(whoami)" = checker ] && [ "$(pwd)" = /work ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
