#!/bin/sh
# The server the agent was asked to leave running must answer.
if [ "$(wget -qO- http://127.0.0.1:8090/ 2>&1)" = served-by-the-agent ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "no server on 127.0.0.1:8090"
  echo 0 > /logs/verifier/reward.txt
fi
