#!/bin/sh
# Tells the test which secrets the trial minted, reversed, so that the
# scrubbing of the trial's files leaves them and the test can look for
# their real forms everywhere else.
for f in /run/troupe/agents/*/key /run/troupe/agents/*/token; do
  echo "reversed $(rev < "$f")"
done
echo 0 > /logs/verifier/reward.txt
